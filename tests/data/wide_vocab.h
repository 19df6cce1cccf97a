// A Hugging Face tokenizer folder whose vocabulary passes 65,536 tokens, as Llama 3's (128,256) and
// Qwen2's (151,646) do, built from GPT-2's so that its ids are known without another tokenizer:
// kWideShift filler tokens take ids 0..kWideShift-1 (written "ĀĀ<n>": two NUL bytes and digits,
// which no merge reaches), GPT-2's tokens follow at their own id + kWideShift (so its common tokens
// sit past 65,535), and "<|end_of_text|>", an added token appended last, is the end of text that
// tokenizer_config.json names (Llama 3's spelling). Encoding any text gives GPT-2's ids + kWideShift.
#pragma once
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/test_util.h"
#include "data/hf_tokenizer_json.h"
#include "io/fileutil.h"

namespace mptrain::data_test {

inline constexpr int kWideShift = 20000;
inline constexpr const char* kWideEos = "<|end_of_text|>";

// Writes tokenizer.json and tokenizer_config.json into `dir`; returns `dir`.
inline std::string write_wide_vocab_folder(const std::string& dir) {
  const std::string gpt2 = testing::gpt2_vocab_dir();
  nlohmann::json j = nlohmann::json::parse(
      tokenizer_json_from_gpt2_files(read_file(gpt2 + "/encoder.json"), read_file(gpt2 + "/vocab.bpe")));
  nlohmann::json vocab = nlohmann::json::object();
  for (int i = 0; i < kWideShift; ++i) vocab["\u0100\u0100" + std::to_string(i)] = i;
  int n = kWideShift;
  for (const auto& [token, id] : j["model"]["vocab"].items()) {
    vocab[token] = id.get<int>() + kWideShift;
    n = std::max(n, id.get<int>() + kWideShift + 1);
  }
  j["model"]["vocab"] = vocab;
  for (auto& added : j["added_tokens"]) added["id"] = added["id"].get<int>() + kWideShift;
  j["added_tokens"].push_back({{"id", n}, {"content", kWideEos}, {"special", true}});
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << j.dump();
  const nlohmann::json config = {{"eos_token", {{"__type", "AddedToken"}, {"content", kWideEos}}},
                                 {"model_max_length", 8192}};
  std::ofstream(dir + "/tokenizer_config.json") << config.dump(2);
  return dir;
}

}  // namespace mptrain::data_test
