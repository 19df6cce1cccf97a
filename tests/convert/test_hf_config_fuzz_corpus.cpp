// What `mptrain convert --from-hf` reads from a Hugging Face folder before any weights, held to
// the seed corpus of fuzz/hf_config_fuzz.cpp (fuzz/corpus/hf_config/): config.json through
// read_hf_config and the two families' translations. A valid_* file is accepted by
// gpt2_config_from_hf or bert_config_from_hf; every other file (not JSON, not an object,
// infinite epsilons, a pad_token_id of 1e20, sizes past 2^30, unsupported settings) is rejected
// by both with mptrain::Error. The same bytes as tokenizer_config.json beside a valid vocab.txt
// may only fail with Error. And the size audit's regression: a config.json claiming more than
// the folder's model.safetensors can hold fails before the parameter table or buffer is built.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>
#include <string>

#include "common/fuzz_corpus.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/fileutil.h"
#include "hf/hf_bert.h"
#include "hf/hf_convert.h"
#include "io/hf_folder.h"
#include "hf/hf_gpt2.h"
#include "io/safetensors.h"

namespace mptrain {
namespace {

void parse_hf_config(const std::string& dir, const std::string& text) {
  write_file_atomic(dir + "/tokenizer_config.json", text);
  try {
    (void)read_hf_bert_vocab(dir, "", 1 << 20);
  } catch (const Error&) {
  }
  write_file_atomic(dir + "/" + kHfConfigFile, text);
  const nlohmann::json cfg = read_hf_config(dir);
  try {
    validate(gpt2_config_from_hf(cfg, "'config.json'", 128));
  } catch (const Error&) {
    validate(bert_config_from_hf(cfg, "'config.json'", kBertVocabMultiple));
  }
}

TEST(HfConfigBytes, SeedCorpus) {
  testing::TempDir dir;
  write_file_atomic(dir.path() + "/vocab.txt", std::string("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\n"));
  testing::check_fuzz_corpus("hf_config", [&](const std::string& b) { parse_hf_config(dir.path(), b); });
}

// A folder whose model.safetensors holds one 4-element tensor, and config.json = cfg.
std::string tiny_folder(const testing::TempDir& tmp, const std::string& name, const nlohmann::json& cfg) {
  const std::string dir = tmp.path() + "/" + name;
  std::filesystem::create_directories(dir);
  const std::vector<float> w(4, 1.0f);
  SafetensorsWriter file;
  file.add("wte.weight", DType::F32, {2, 2}, w.data());
  file.write(dir + "/" + kHfModelFile);
  write_file_atomic(dir + "/" + kHfConfigFile, cfg.dump());
  return dir;
}

nlohmann::json with(nlohmann::json j, const nlohmann::json& fields) {
  j.update(fields);
  return j;
}

TEST(HfConfigSizes, ClaimsBeyondTheFileFailBeforeAllocating) {
  testing::TempDir tmp;
  const nlohmann::json gpt2 = {{"model_type", "gpt2"}, {"n_layer", 1}, {"n_head", 2},       {"n_embd", 64},
                               {"n_positions", 64},    {"vocab_size", 50257}};
  const nlohmann::json bert = {{"model_type", "bert"}, {"vocab_size", 30522}, {"hidden_size", 128},
                               {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"intermediate_size", 512}};
  struct Case {
    std::string name;
    nlohmann::json cfg;
    std::string needle;
  };
  const std::vector<Case> cases = {
      // 10^9 layers: the table alone would be 12 * 10^9 entries.
      {"gpt2_layers", with(gpt2, {{"n_layer", 1000000000}}), "describes 1000000000 layers"},
      {"bert_layers", with(bert, {{"num_hidden_layers", 1000000000}}), "describes 1000000000 layers"},
      // 2^20 wide: wte alone is 5 * 10^10 parameters (200 GB of fp32).
      {"gpt2_wide", with(gpt2, {{"n_embd", 1 << 20}}), "bytes of tensors"},
      {"bert_wide", with(bert, {{"hidden_size", 1 << 20}, {"intermediate_size", 1 << 30}}),
       "bytes of tensors"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = tiny_folder(tmp, c.name, c.cfg);
    const auto start = std::chrono::steady_clock::now();
    try {
      import_hf_folder(dir, tmp.path() + "/out_" + c.name, 0);
      ADD_FAILURE() << "imported";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  }
}

}  // namespace
}  // namespace mptrain
