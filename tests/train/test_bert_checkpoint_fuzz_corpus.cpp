// BERT checkpoint JSON (train/bert_checkpoint.h, fuzz/bert_checkpoint_fuzz.cpp's entry points)
// held to its seed corpus fuzz/corpus/bert_checkpoint/: a valid_* file is a state.json that
// load_bert_checkpoint_state accepts or an mptrain_config that bert_config_from_json accepts;
// every other file (wrong types, 1e300 or negative numbers, a non-string "model", another
// model's state) is rejected by both with mptrain::Error, never an nlohmann exception or UB
// (which the sanitizer build turns into a failure). tokenizer_config.json's reader gets every
// file too and may only throw Error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/fuzz_corpus.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/fileutil.h"
#include "train/bert_checkpoint.h"

namespace mptrain {
namespace {

// Accepts `text` as a BERT state.json or a BERT mptrain_config; otherwise throws the state
// reader's Error (both must reject with Error).
void parse_bert_checkpoint_json(const std::string& dir, const std::string& text) {
  write_file_atomic(dir + "/state.json", text);
  write_file_atomic(dir + "/tokenizer_config.json", text);
  try {
    (void)bert_checkpoint_lower_case(dir);
  } catch (const Error&) {  // not JSON
  }
  try {
    (void)load_bert_checkpoint_state(dir);
    return;
  } catch (const Error& state_error) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw;
    try {
      validate(bert_config_from_json(j, "'mptrain_config'"));
      return;
    } catch (const Error&) {
      throw state_error;
    }
  }
}

TEST(BertCheckpointJson, SeedCorpus) {
  testing::TempDir dir;
  testing::check_fuzz_corpus("bert_checkpoint",
                             [&](const std::string& b) { parse_bert_checkpoint_json(dir.path(), b); });
}

TEST(BertCheckpointJson, StateFieldsRoundTripAndOldStatesLoad) {
  testing::TempDir dir;
  for (const auto& [name, text] : testing::fuzz_corpus("bert_checkpoint")) {
    if (name != "valid_state" && name != "valid_state_old") continue;
    SCOPED_TRACE(name);
    write_file_atomic(dir.path() + "/state.json", text);
    const BertTrainState s = load_bert_checkpoint_state(dir.path());
    const nlohmann::json j = nlohmann::json::parse(text);
    EXPECT_EQ(s.step, j["step"].get<int64_t>());
    EXPECT_EQ(s.train_pos.index, j["train_index"].get<int64_t>());
    EXPECT_EQ(s.train_pos.epoch, j["train_epoch"].get<int64_t>());
    EXPECT_EQ(s.seed, j["seed"].get<uint64_t>());
  }
}

}  // namespace
}  // namespace mptrain
