// tokenizer.json ⇄ GPT-2's vocabulary files (data/hf_tokenizer_json.h).
#include "data/hf_tokenizer_json.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"

namespace mptrain {

namespace {

constexpr const char* kEot = "<|endoftext|>";

// A field that must be absent, null, false or "" (a BPE or ByteLevel option GPT-2 does not use).
bool unset(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() || (it->is_boolean() && !it->get<bool>()) ||
         (it->is_string() && it->get<std::string>().empty());
}

std::string type_of(const nlohmann::json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "?";
}

// The pre-tokenizer must be GPT-2's: ByteLevel (alone, or the last step of a Sequence) with its
// regex and no prefix space, after at most one Digits step; returns that step's split.
DigitSplit check_pre_tokenizer(const nlohmann::json& pre, const std::string& what) {
  MPT_CHECK(!pre.is_null(), what + ": no pre_tokenizer; only the ByteLevel one (GPT-2's) is supported");
  const std::string type = type_of(pre);
  if (type == "Sequence") {
    const auto it = pre.find("pretokenizers");
    MPT_CHECK(it != pre.end() && it->is_array() && !it->empty() && it->size() <= 2,
              what + ": a pre_tokenizer Sequence is supported as [ByteLevel] or [Digits, ByteLevel] only");
    DigitSplit digits = DigitSplit::kNone;
    if (it->size() == 2) {
      const nlohmann::json& d = (*it)[0];
      MPT_CHECK(type_of(d) == "Digits", what + ": a pre_tokenizer Sequence step " + type_of(d) +
                                            " is not supported (only Digits before ByteLevel)");
      digits = d.contains("individual_digits") && d["individual_digits"].is_boolean() &&
                       d["individual_digits"].get<bool>()
                   ? DigitSplit::kIndividual
                   : DigitSplit::kRuns;
    }
    MPT_CHECK(check_pre_tokenizer(it->back(), what) == DigitSplit::kNone,
              what + ": a pre_tokenizer Sequence inside a Sequence is not supported");
    return digits;
  }
  MPT_CHECK(type != "Metaspace",
            what +
                ": the Metaspace pre_tokenizer is SentencePiece's, which is not supported "
                "(only byte-level BPE)");
  MPT_CHECK(type == "ByteLevel",
            what + ": pre_tokenizer " + type + " is not supported (only GPT-2's ByteLevel)");
  MPT_CHECK(unset(pre, "add_prefix_space"), what + ": ByteLevel with add_prefix_space is not supported");
  MPT_CHECK(!pre.contains("use_regex") || (pre["use_regex"].is_boolean() && pre["use_regex"].get<bool>()),
            what + ": ByteLevel without its regex (use_regex false) is not supported");
  return DigitSplit::kNone;
}

}  // namespace

Gpt2Files gpt2_files_from_tokenizer_json(std::string_view text, const std::string& path) {
  const std::string what = "'" + path + "'";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + " is not valid JSON: " + e.what());
  }
  MPT_CHECK(j.is_object() && j.contains("model") && j["model"].is_object(), what + ": no \"model\" object");
  const nlohmann::json& model = j["model"];
  const std::string type = type_of(model);
  MPT_CHECK(type != "Unigram",
            what + ": a Unigram model (SentencePiece's) is not supported: only byte-level BPE");
  MPT_CHECK(type == "BPE", what + ": model type " + type + " is not supported: only byte-level BPE");
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix", "byte_fallback"})
    MPT_CHECK(unset(model, key),
              what + ": the BPE option " + key + " is not supported (GPT-2's BPE has none)");
  MPT_CHECK(
      !j.contains("normalizer") || j["normalizer"].is_null(),
      what + ": normalizer " + type_of(j["normalizer"]) + " is not supported (GPT-2's tokenizer has none)");
  const DigitSplit digits =
      check_pre_tokenizer(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : nlohmann::json(), what);
  MPT_CHECK(model.contains("vocab") && model["vocab"].is_object() && model.contains("merges") &&
                model["merges"].is_array(),
            what + ": the BPE model needs a \"vocab\" object and a \"merges\" array");
  Gpt2Files f;
  f.digits = digits;
  f.encoder_json = model["vocab"].dump();
  f.vocab_bpe = "#version: 0.2\n";
  // Merges are "left right" strings (older files) or [left, right] pairs (tokenizers >= 0.20).
  for (const auto& m : model["merges"]) {
    if (m.is_string()) {
      f.vocab_bpe += m.get<std::string>();
    } else {
      MPT_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                what + ": a merge is neither \"left right\" nor [left, right]");
      f.vocab_bpe += m[0].get<std::string>() + " " + m[1].get<std::string>();
    }
    f.vocab_bpe += "\n";
  }
  return f;
}

std::string tokenizer_json_from_gpt2_files(std::string_view encoder_json, std::string_view vocab_bpe) {
  const nlohmann::json vocab = nlohmann::json::parse(encoder_json);
  nlohmann::json merges = nlohmann::json::array();
  size_t pos = 0;
  while (pos < vocab_bpe.size()) {
    size_t nl = vocab_bpe.find('\n', pos);
    if (nl == std::string_view::npos) nl = vocab_bpe.size();
    std::string line(vocab_bpe.substr(pos, nl - pos));
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.starts_with("#version")) continue;
    merges.push_back(line);
  }
  const nlohmann::json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  nlohmann::json j = {{"version", "1.0"},
                      {"truncation", nullptr},
                      {"padding", nullptr},
                      {"added_tokens",
                       {{{"id", vocab.contains(kEot) ? vocab[kEot] : nlohmann::json(nullptr)},
                         {"content", kEot},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", true},
                         {"special", true}}}},
                      {"normalizer", nullptr},
                      {"pre_tokenizer", byte_level},
                      {"post_processor", byte_level},
                      {"decoder", byte_level},
                      {"model",
                       {{"type", "BPE"},
                        {"dropout", nullptr},
                        {"unk_token", nullptr},
                        {"continuing_subword_prefix", ""},
                        {"end_of_word_suffix", ""},
                        {"fuse_unk", false},
                        {"byte_fallback", false},
                        {"vocab", vocab},
                        {"merges", merges}}}};
  return j.dump() + "\n";
}

}  // namespace mptrain
