// Numeric guards as a user meets them: `mptrain train` (bf16) with a NaN injected into one
// parameter's gradient through the test-only MPTRAIN_TEST_INJECT_NAN hook.
//  - default --on-nan stop: one error line naming the step and the parameter, non-zero exit,
//    no checkpoint or metrics record for the bad step or later
//  - --on-nan rollback: reloads the last checkpoint, continues to the end with the learning
//    rate halved from then on (metrics.jsonl against the schedule), records lr_scale in
//    state.json, and a resume keeps the lower rate
//  - --nan-max-rollbacks 0: gives up with a clear error
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "io/checkpoint_dir.h"
#include "io/fileutil.h"
#include "optim/schedule.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::run_mptrain;
using testing::TempDir;

std::string train_args(const std::string& data, const std::string& run, int64_t steps) {
  return "train --preset d2 --precision bf16 --train-data '" + data + "/train_*.bin' --batch 2 --seq 32 --lr 3e-3 "
         "--warmup 2 --steps " + std::to_string(steps) + " --save-every 2 --sample-tokens 1 --threads 2 "
         "--deterministic --seed 5 --run-dir " + run;
}

// MPTRAIN_TEST_INJECT_NAN=<at> for this one command.
testing::RunResult train_with_nan(const std::string& at, const std::string& args) {
  return run_command("MPTRAIN_TEST_INJECT_NAN=" + at + " " + std::string(MPTRAIN_BINARY) + " " + args);
}

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

TEST(NumericGuardCli, StopNamesTheParameterAndExitsNonZero) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string run = tmp / "run";
  auto r = train_with_nan("3:h.1.mlp.c_fc.weight", train_args(tmp.path(), run, 6) + " --quiet");
  testing::expect_clear_error(r, "non-finite gradient at step 3");
  EXPECT_NE(r.output.find("first non-finite gradient: h.1.mlp.c_fc.weight (element 0 = nan)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("the weights were not updated; stopping"), std::string::npos) << r.output;
  // The last checkpoint is the one before the bad step; nothing of step 3 or later was written.
  EXPECT_EQ(resolve_checkpoint(run), run + "/" + checkpoint_name(2));
  EXPECT_FALSE(fs::exists(run + "/" + checkpoint_name(4)));
  const auto rec = records(run);
  ASSERT_FALSE(rec.empty());
  EXPECT_EQ(rec.rbegin()->first, 2);
}

TEST(NumericGuardCli, RollbackReloadsTheCheckpointAndHalvesTheLearningRate) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string run = tmp / "run";
  auto b = train_with_nan("3:wte.weight", train_args(tmp.path(), run, 4) + " --on-nan rollback --log-every 1");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("non-finite gradient at step 3"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("first non-finite gradient: wte.weight (element 0 = nan)"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("rolled back to " + run + "/" + checkpoint_name(2)), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("learning rate x0.5 from now on"), std::string::npos) << b.output;

  // The schedule of these options (lr 3e-3, warmup 2, min_lr_frac 0.1), halved from step 3 on.
  const LrSchedule schedule{3e-3f, 0.1f, 2, 4};
  const auto rec = records(run);
  ASSERT_EQ(rec.size(), 4u);  // steps 1-4: the bad step 3 left no record, its replay did
  for (int64_t s = 1; s <= 4; ++s) {
    const double expected = schedule.at(s - 1) * (s >= 3 ? 0.5 : 1.0);
    EXPECT_NEAR(rec.at(s)["lr"].get<double>(), expected, 1e-6 * expected) << "step " << s;
    EXPECT_TRUE(std::isfinite(rec.at(s)["train_loss"].get<double>()));
  }
  const auto state = nlohmann::json::parse(read_file(run + "/" + checkpoint_name(4) + "/state.json"));
  EXPECT_EQ(state["lr_scale"].get<double>(), 0.5);
  EXPECT_EQ(state["nan_rollbacks"].get<int>(), 1);

  // A resume keeps the lower learning rate.
  const std::string resumed = tmp / "resumed";
  auto c = run_mptrain(train_args(tmp.path(), resumed, 5) + " --resume " + run);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const auto rc = records(resumed);
  ASSERT_TRUE(rc.count(5));
  const double expected = LrSchedule{3e-3f, 0.1f, 2, 5}.at(4) * 0.5;
  EXPECT_NEAR(rc.at(5)["lr"].get<double>(), expected, 1e-6 * expected);
}

TEST(NumericGuardCli, GivesUpAfterTheMaximumNumberOfRollbacks) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  auto r = train_with_nan("3:ln_f.bias",
                          train_args(tmp.path(), tmp / "run", 4) + " --quiet --on-nan rollback --nan-max-rollbacks 0");
  testing::expect_clear_error(r, "giving up after 0 rollback(s) (--nan-max-rollbacks 0)");
  EXPECT_NE(r.output.find("ln_f.bias"), std::string::npos) << r.output;
}

TEST(NumericGuardCli, RollbackWithoutACheckpointSaysSo) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  auto r = train_with_nan("1:wpe.weight", train_args(tmp.path(), tmp / "run", 4) + " --quiet --on-nan rollback");
  testing::expect_clear_error(r, "no checkpoint to roll back to yet");
}

TEST(NumericGuardCli, BadGuardOptionsAreClearErrors) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  testing::expect_clear_error(run_mptrain(train_args(tmp.path(), tmp / "run", 2) + " --nan-lr-factor 1.5"),
                              "--nan-lr-factor must be in (0, 1)");
  testing::expect_clear_error(train_with_nan("x:wte.weight", train_args(tmp.path(), tmp / "run", 2) + " --quiet"),
                              "MPTRAIN_TEST_INJECT_NAN='x:wte.weight'");
  testing::expect_clear_error(train_with_nan("1:nope", train_args(tmp.path(), tmp / "run", 2) + " --quiet"), "nope");
}

}  // namespace
}  // namespace mptrain
