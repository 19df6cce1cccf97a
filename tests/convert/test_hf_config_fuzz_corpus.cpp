// What `mptrain convert --from-hf` reads from a Hugging Face folder before any weights, held to
// the seed corpus of fuzz/hf_config_fuzz.cpp (fuzz/corpus/hf_config/): config.json through
// read_hf_config and the two families' translations. A valid_* file is accepted by
// gpt2_config_from_hf or bert_config_from_hf; every other file (not JSON, not an object,
// infinite epsilons, a pad_token_id of 1e20, sizes past 2^30, unsupported settings) is rejected
// by both with mptrain::Error. The same bytes as tokenizer_config.json beside a valid vocab.txt
// may only fail with Error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/fuzz_corpus.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/fileutil.h"
#include "io/hf_bert.h"
#include "io/hf_folder.h"
#include "io/hf_gpt2.h"

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

}  // namespace
}  // namespace mptrain
