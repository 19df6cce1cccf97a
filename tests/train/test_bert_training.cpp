// BERT through the shared training loop (train/trainer.cpp over train/bert_task.h): what GPT-2
// had and BERT's own loop lacked.
//  - --schedule linear: warmup, then a straight line to min_lr_frac·lr (metrics.jsonl's lr
//    against optim/schedule.h)
//  - the numeric guard: a NaN injected into one BERT gradient (MPTRAIN_TEST_INJECT_NAN) stops
//    the run with the parameter's name, or --on-nan rollback reloads the last checkpoint and
//    continues at half the learning rate (state.json lr_scale)
//  - BERT's state.json reader: every malformed field is one mptrain::Error
// Sizes: bert-tiny, vocab 512, T = 32, B = 8: a few ms per step.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/checkpoint_dir.h"
#include "io/fileutil.h"
#include "optim/schedule.h"
#include "train/bert_checkpoint.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::expect_clear_error;
using testing::run_command;
using testing::run_mptrain;
using testing::TempDir;

// step -> the metrics.jsonl record (the last one written for that step).
std::map<int64_t, nlohmann::json> records(const std::string& run) {
  std::ifstream in(run + "/metrics.jsonl");
  std::map<int64_t, nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("step") && j.contains("lr")) out[j["step"].get<int64_t>()] = j;
  }
  return out;
}

class BertTraining : public testing::BertDataSuite {
 protected:
  // A tiny deterministic BERT run of `steps` steps into run dir `run` (under the suite's tmp).
  static std::string args(const std::string& run, int steps, const std::string& extra = "") {
    return "train --model bert --preset bert-tiny --data " + data() +
           " --batch 8 --lr 3e-3 --warmup 2 --max-predictions 5 --seed 7 --threads 2 --deterministic"
           " --progress lines --log-every 1 --steps " + std::to_string(steps) + " --run-dir " + run_dir(run) + " " +
           extra;
  }
};

TEST_F(BertTraining, LinearScheduleDecaysInAStraightLine) {
  auto r = run_mptrain(args("linear", 6, "--schedule linear --min-lr-frac 0.1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("schedule linear: warmup 2 steps, then linear decay to 0.1 x lr at step 6"),
            std::string::npos)
      << r.output;
  const auto rec = records(run_dir("linear"));
  ASSERT_EQ(rec.size(), 6u);
  const LrSchedule linear{3e-3f, 0.1f, 2, 6, LrShape::Linear}, cosine{3e-3f, 0.1f, 2, 6};
  for (const auto& [step, j] : rec) EXPECT_FLOAT_EQ(j["lr"].get<float>(), linear.at(step - 1)) << step;
  EXPECT_NE(linear.at(3), cosine.at(3));  // the test tells the two apart
  // Recorded with the options (config.json, state.json).
  const auto state = nlohmann::json::parse(read_file(resolve_checkpoint(run_dir("linear")) + "/state.json"));
  EXPECT_EQ(state["options"]["schedule"], "linear");
}

TEST_F(BertTraining, NonFiniteGradientStopsNamingTheBertParameter) {
  auto r = run_command("MPTRAIN_TEST_INJECT_NAN=3:bert.pooler.dense.weight " + std::string(MPTRAIN_BINARY) + " " +
                       args("nan_stop", 5, "--save-every 2 --quiet"));
  expect_clear_error(r, "non-finite gradient at step 3");
  EXPECT_NE(r.output.find("first non-finite gradient: bert.pooler.dense.weight (element 0 = nan)"), std::string::npos)
      << r.output;
  EXPECT_EQ(resolve_checkpoint(run_dir("nan_stop")), run_dir("nan_stop") + "/" + checkpoint_name(2));
}

TEST_F(BertTraining, OnNanRollbackReloadsTheCheckpointAndHalvesTheLearningRate) {
  const std::string run = run_dir("nan_rollback");
  auto r = run_command("MPTRAIN_TEST_INJECT_NAN=3:bert.encoder.layer.0.attention.self.query.weight " +
                       std::string(MPTRAIN_BINARY) + " " + args("nan_rollback", 5, "--save-every 2 --on-nan rollback"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("first non-finite gradient: bert.encoder.layer.0.attention.self.query.weight"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("rolled back to " + run + "/" + checkpoint_name(2)), std::string::npos) << r.output;
  const auto rec = records(run);
  ASSERT_EQ(rec.rbegin()->first, 5);
  const LrSchedule schedule{3e-3f, 0.1f, 2, 5};
  EXPECT_FLOAT_EQ(rec.at(2)["lr"].get<float>(), schedule.at(1));         // before: the schedule's
  for (int64_t s = 3; s <= 5; ++s)                                        // replayed and after: halved
    EXPECT_FLOAT_EQ(rec.at(s)["lr"].get<float>(), schedule.at(s - 1) * 0.5f) << s;
  const BertTrainState st = load_bert_checkpoint_state(resolve_checkpoint(run));
  EXPECT_EQ(st.step, 5);
  EXPECT_FLOAT_EQ(st.lr_scale, 0.5f);
  EXPECT_EQ(st.nan_rollbacks, 1);
  // Bit-identical to a run that never saw the NaN up to the checkpoint (step 2's loss), and the
  // replayed step 3 draws the same batch as the first attempt would have.
  auto clean = run_mptrain(args("clean", 2));
  ASSERT_EQ(clean.exit_code, 0) << clean.output;
  EXPECT_EQ(records(run_dir("clean")).at(2)["train_loss"], rec.at(2)["train_loss"]);
}

TEST(BertCheckpointState, MalformedFieldsAreOneClearError) {
  const std::string good =
      R"({"model": "bert", "step": 4, "train_index": 32, "train_epoch": 1, "seed": 7, "precision": "fp16",)"
      R"( "loss_scaler": {"scale": 1024.0, "growth_tracker": 3, "skipped_steps": 1}, "lr_scale": 0.5,)"
      R"( "nan_rollbacks": 1})";
  const BertTrainState s = parse_bert_checkpoint_state(good, "'s'");
  EXPECT_EQ(s.step, 4);
  EXPECT_EQ(s.train_pos.index, 32);
  EXPECT_EQ(s.train_pos.epoch, 1);
  EXPECT_EQ(s.precision, "fp16");
  EXPECT_TRUE(s.has_loss_scaler);
  EXPECT_FLOAT_EQ(s.loss_scale, 1024.0f);
  EXPECT_FLOAT_EQ(s.lr_scale, 0.5f);
  // A file of the BERT loop before the shared one (no precision, scaler or rollback fields).
  const BertTrainState old =
      parse_bert_checkpoint_state(R"({"model": "bert", "step": 3, "train_index": 0, "train_epoch": 0, "seed": 1})", "'s'");
  EXPECT_EQ(old.precision, "fp32");
  EXPECT_FALSE(old.has_loss_scaler);
  EXPECT_FLOAT_EQ(old.lr_scale, 1.0f);

  const std::pair<std::string, std::string> bad[] = {
      {"{", "is not valid JSON"},
      {"[1, 2]", "is not the state of a BERT run"},
      {R"({"model": "gpt2", "step": 1})", "is not the state of a BERT run"},
      {R"({"model": 3, "step": 1})", "is not the state of a BERT run"},
      {R"({"model": "bert", "step": 1e300, "train_index": 0, "train_epoch": 0, "seed": 1})", "field 'step' must be an integer"},
      {R"({"model": "bert", "step": "4", "train_index": 0, "train_epoch": 0, "seed": 1})", "field 'step' must be an integer"},
      {R"({"model": "bert", "step": 4, "train_index": 0.5, "train_epoch": 0, "seed": 1})", "field 'train_index' must be an integer"},
      {R"({"model": "bert", "step": 4, "train_index": -3, "train_epoch": 0, "seed": 1})", "must be non-negative"},
      {R"({"model": "bert", "step": 4, "train_epoch": 0, "seed": 1})", "missing field 'train_index'"},
      {R"({"model": "bert", "step": 4, "train_index": 0, "train_epoch": 0, "seed": -1})", "field 'seed' must be an integer"},
      {R"({"model": "bert", "step": 4, "train_index": 0, "train_epoch": 0, "seed": 1, "precision": 16})", "field 'precision' has the wrong type"},
      {R"({"model": "bert", "step": 4, "train_index": 0, "train_epoch": 0, "seed": 1, "precision": "fp8"})", "unknown precision"},
      {R"({"model": "bert", "step": 4, "train_index": 0, "train_epoch": 0, "seed": 1, "lr_scale": 2})", "lr_scale must be in (0, 1]"},
      {R"({"model": "bert", "step": 4, "train_index": 0, "train_epoch": 0, "seed": 1, "loss_scaler": []})", "missing field 'scale'"},
  };
  for (const auto& [text, needle] : bad) {
    try {
      parse_bert_checkpoint_state(text, "'state.json'");
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << text << " -> " << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("'state.json'", 0), 0u) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << text << " threw a non-mptrain exception: " << e.what();
    }
  }
}

}  // namespace
}  // namespace mptrain
