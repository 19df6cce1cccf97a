// The checkpoint JSON readers on text (train/checkpoint_json.cpp, the fuzz targets' entry
// points): state.json and the mptrain_config metadata, held to their seed corpora, and the
// numeric range checks that fuzz_checkpoint_state showed were missing (1e300 read as an integer
// was undefined behaviour; -1 read as the uint64 seed became 2^64 - 1).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "common/fuzz_corpus.h"
#include "common/test_util.h"
#include "core/error.h"
#include "hf/hf_gpt2.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"

namespace mptrain {
namespace {

const char* kState =
    R"({"step": 5, "train_shard": 0, "train_offset": 64, "train_epoch": 0, "seed": 1337, "sample_counter": 2})";

std::string with(const std::string& field, const std::string& value) {
  nlohmann::json j = nlohmann::json::parse(kState);
  j[field] = nlohmann::json::parse(value);
  return j.dump();
}

void expect_error(const std::string& text, const std::string& needle) {
  try {
    parse_checkpoint_state(text, "'state.json'");
    ADD_FAILURE() << "accepted: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(CheckpointJson, SeedCorpora) {
  testing::check_fuzz_corpus("checkpoint_state", [](const std::string& b) { parse_checkpoint_state(b, "'s'"); });
  // model_config's seeds are mptrain_config and config.json texts: valid_ ones parse as one or the other.
  for (const auto& [name, text] : testing::fuzz_corpus("model_config")) {
    SCOPED_TRACE(name);
    bool accepted = false;
    try {
      parse_checkpoint_config(text, "'c'");
      accepted = true;
    } catch (const Error&) {
    }
    try {
      gpt2_config_from_hf(nlohmann::json::parse(text), "'c'", 128);
      accepted = true;
    } catch (const Error&) {
    }
    EXPECT_EQ(accepted, name.rfind("valid", 0) == 0);
  }
}

TEST(CheckpointJson, NumbersOutOfRangeAreErrors) {
  EXPECT_EQ(parse_checkpoint_state(kState, "'s'").step, 5);
  expect_error(with("step", "1e300"), "field 'step' must be an integer");  // was UB (double -> int64)
  expect_error(with("step", "5.5"), "field 'step' must be an integer");
  expect_error(with("seed", "-1"), "field 'seed' must be an integer in [0, 18446744073709551615]");
  expect_error(with("train_offset", "\"64\""), "field 'train_offset' must be an integer");
  expect_error(with("loss_scaler", R"({"scale": 1e300, "growth_tracker": 0, "skipped_steps": 0})"),
               "field 'scale' must be a finite number");
  expect_error(with("loss_scaler", R"({"scale": 1.0, "growth_tracker": 4294967296, "skipped_steps": 0})"),
               "field 'growth_tracker' must be an integer in [-2147483648, 2147483647]");
  const std::string config =
      R"({"block_size": 64, "vocab_size": 50257, "padded_vocab_size": 50304, "n_layer": 2, "n_head": 2, "n_embd": 64)";
  EXPECT_EQ(parse_checkpoint_config(config + "}", "'c'").n_embd, 64);
  EXPECT_THROW(parse_checkpoint_config(config + R"(, "ln_eps": 1e300})", "'c'"), Error);
  EXPECT_THROW(parse_checkpoint_config(config + R"(, "n_layer": 2.5e10})", "'c'"), Error);
}

// The shuffled loader's position (`train --shuffle`) round-trips; files without train_order (every
// older one) are sequential; a train_order that is neither is refused.
TEST(CheckpointJson, ShuffledDataPositionRoundTrips) {
  TrainState s;
  s.step = 9;
  s.train_pos = {.epoch = 3, .shuffled = true, .index = 48};
  const TrainState back = parse_checkpoint_state(train_state_json(s).dump(), "'s'");
  EXPECT_TRUE(back.train_pos.shuffled);
  EXPECT_EQ(back.train_pos.index, 48);
  EXPECT_EQ(back.train_pos.epoch, 3);
  EXPECT_FALSE(parse_checkpoint_state(kState, "'s'").train_pos.shuffled);
  EXPECT_FALSE(parse_checkpoint_state(with("train_order", "\"sequential\""), "'s'").train_pos.shuffled);
  expect_error(with("train_order", "\"random\""), "train_order 'random' is neither");
  expect_error(with("train_order", "\"shuffled\""), "missing field 'train_index'");
}

// A checkpoint whose mptrain_config claims more than its model.safetensors holds (a corrupt or
// hand-edited file) is refused before the model is sized from it: no table of 10^5 layers, no
// multi-gigabyte buffer allocated and zeroed only to find the tensors missing.
TEST(CheckpointConfig, ClaimsBeyondTheFileFailBeforeAnythingIsSized) {
  testing::TempDir tmp;
  const Gpt2Config small = gpt2_preset("d2");
  const ParamTable table = gpt2_param_table(small);
  std::vector<float> params(table.total(), 0.0f);
  auto expect_refused = [&](const Gpt2Config& claimed, const std::string& name, const std::string& needle) {
    std::filesystem::create_directories(tmp / name);
    save_weights_checkpoint(tmp / name, claimed, table, params.data(), TrainState{});
    try {
      load_checkpoint_config(tmp / name);
      ADD_FAILURE() << name << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Gpt2Config layers = small;
  layers.n_layer = 100000;
  expect_refused(layers, "layers", "describes 100000 layers");
  Gpt2Config wide = small;
  wide.n_embd = 65536, wide.n_head = 1;
  expect_refused(wide, "wide", "parameters but");
  // The honest checkpoint still loads.
  std::filesystem::create_directories(tmp / "ok");
  save_weights_checkpoint(tmp / "ok", small, table, params.data(), TrainState{});
  EXPECT_EQ(load_checkpoint_config(tmp / "ok").n_layer, small.n_layer);
}

}  // namespace
}  // namespace mptrain
