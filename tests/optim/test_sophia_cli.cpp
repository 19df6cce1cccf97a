// `mptrain train --optimizer sophia` as a user runs it (subprocess):
//  - bad input (k <= 0, rho <= 0, lr <= 0, unknown optimizer or recipe, Sophia flags with
//    AdamW, resuming one optimizer's checkpoint with the other) gives one clear error line
//    and a non-zero exit, never a crash
//  - Hessian steps put the win rate in the log line and in metrics.jsonl
//  - resuming from a checkpoint between two Hessian estimates continues bit for bit
//  - --recipe sophia-gpt2 sets the authors' values, and explicit flags win over it
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::expect_clear_error;
using testing::run_mptrain;
using testing::TempDir;


std::string train(const std::string& dir, const std::string& extra, int steps = 2, const std::string& run = "run") {
  return "train --preset d2 --train-data '" + dir + "/train_*.bin' --batch 2 --seq 16 --steps " + std::to_string(steps) +
         " --threads 1 --run-dir " + dir + "/" + run + " " + extra;
}

TEST(SophiaCli, BadHyperparametersGiveOneClearError) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string d = tmp.path();
  expect_clear_error(run_mptrain(train(d, "--optimizer sophia --sophia-k 0")), "--sophia-k");
  expect_clear_error(run_mptrain(train(d, "--optimizer sophia --sophia-k -3")), "--sophia-k");
  expect_clear_error(run_mptrain(train(d, "--optimizer sophia --sophia-rho 0")), "--sophia-rho must be positive");
  expect_clear_error(run_mptrain(train(d, "--optimizer sophia --sophia-rho -0.04")), "--sophia-rho must be positive");
  expect_clear_error(run_mptrain(train(d, "--optimizer sophia --lr 0")), "--lr must be positive");
  expect_clear_error(run_mptrain(train(d, "--optimizer sophia --lr -1e-3")), "--lr must be positive");
  expect_clear_error(run_mptrain(train(d, "--recipe sophia-gpt2 --lr 0")), "--lr must be positive");
  expect_clear_error(run_mptrain(train(d, "--optimizer lion")), "lion");
  expect_clear_error(run_mptrain(train(d, "--sophia-rho 0.05")), "only apply with --optimizer sophia");
  expect_clear_error(run_mptrain(train(d, "--recipe nope")), "unknown recipe 'nope'");
  expect_clear_error(run_mptrain(train(d, "--recipe sophia-gpt2 --optimizer adamw")), "Sophia recipe");
}

TEST(SophiaCli, ResumingWithTheOtherOptimizerIsAClearError) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string d = tmp.path();
  auto first = run_mptrain(train(d, "--optimizer sophia --sophia-k 1"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  expect_clear_error(run_mptrain(train(d, "--optimizer adamw --resume " + d + "/run", 3, "b")),
                     "holds sophia optimizer state, but this run uses --optimizer adamw");
  auto adamw = run_mptrain(train(d, "--optimizer adamw", 2, "a"));
  ASSERT_EQ(adamw.exit_code, 0) << adamw.output;
  expect_clear_error(run_mptrain(train(d, "--optimizer sophia --resume " + d + "/a", 3, "c")),
                     "holds adamw optimizer state");
}

std::vector<nlohmann::json> metrics(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(SophiaCli, WinRateIsLoggedAndResumeContinuesTheExactTrajectory) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string d = tmp.path();
  const std::string base = "train --preset d2 --train-data '" + d + "/train_*.bin' --batch 2 --seq 32 --lr 3e-3 "
                           "--warmup 2 --sample-tokens 4 --threads 2 --deterministic --seed 5 --optimizer sophia "
                           "--sophia-k 3 --total-batch 128 --steps 12 --log-every 1";
  auto a = run_mptrain(base + " --save-every 5 --run-dir " + d + "/a");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  // Hessian steps 3, 6, 9, 12 show the win rate; others do not.
  EXPECT_NE(a.output.find("optimizer sophia"), std::string::npos) << a.output;
  const auto ma = metrics(d + "/a");
  ASSERT_EQ(ma.size(), 12u);
  for (const auto& r : ma) {
    const int64_t step = r["step"].get<int64_t>();
    ASSERT_EQ(r.contains("win_rate"), step % 3 == 0) << r.dump();
    if (step % 3 == 0) {
      const double w = r["win_rate"].get<double>();
      EXPECT_TRUE(w >= 0.0 && w <= 1.0) << w;
      EXPECT_GT(r["hessian_loss"].get<double>(), 0.0);
      char needle[32];
      std::snprintf(needle, sizeof(needle), "step %6lld/12", static_cast<long long>(step));
      const size_t at = a.output.find(needle);
      ASSERT_NE(at, std::string::npos) << needle;
      EXPECT_NE(a.output.substr(at, a.output.find('\n', at) - at).find("| win rate "), std::string::npos)
          << a.output.substr(at, 200);
    }
  }
  // Resume from step 5: between the estimates at 3 and 6, so m, h and the RNG counter must
  // all come back for steps 6..12 to repeat bit for bit.
  auto b = run_mptrain(base + " --run-dir " + d + "/b --resume " + d + "/a/step_00000005");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto mb = metrics(d + "/b");
  ASSERT_EQ(mb.size(), 7u);
  for (size_t i = 0; i < mb.size(); ++i) {
    EXPECT_EQ(mb[i]["step"], ma[5 + i]["step"]);
    EXPECT_EQ(mb[i]["train_loss"].get<double>(), ma[5 + i]["train_loss"].get<double>()) << mb[i].dump();
    if (ma[5 + i].contains("win_rate")) {
      EXPECT_EQ(mb[i]["win_rate"].get<double>(), ma[5 + i]["win_rate"].get<double>());
      EXPECT_EQ(mb[i]["hessian_loss"].get<double>(), ma[5 + i]["hessian_loss"].get<double>());
    }
  }
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    auto cmp = testing::run_command("cmp " + d + "/a/step_00000012/" + file + " " + d + "/b/step_00000012/" + file);
    EXPECT_EQ(cmp.exit_code, 0) << file << ": " << cmp.output;
  }
}

TEST(SophiaCli, RecipeSetsTheAuthorsValuesAndExplicitFlagsWin) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string d = tmp.path();
  auto r = run_mptrain(train(d, "--recipe sophia-gpt2 --sophia-rho 0.07 --warmup 1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("optimizer sophia: beta1 0.965, beta2 0.99, rho 0.07, weight decay 0.2, Hessian every 10"),
            std::string::npos)
      << r.output;
  std::ifstream in(d + "/run/step_00000002/state.json");
  const auto state = nlohmann::json::parse(in);
  const auto& o = state["options"];
  EXPECT_EQ(o["optimizer"], "sophia");
  EXPECT_EQ(o["recipe"], "sophia-gpt2");
  EXPECT_FLOAT_EQ(o["lr"].get<float>(), 6e-4f);
  EXPECT_EQ(o["warmup"].get<int64_t>(), 1);  // given: wins over the recipe's 2000
  EXPECT_FLOAT_EQ(o["min_lr_frac"].get<float>(), 1.5e-5f / 6e-4f);
  EXPECT_FLOAT_EQ(o["sophia"]["rho"].get<float>(), 0.07f);
  EXPECT_FLOAT_EQ(o["sophia"]["weight_decay"].get<float>(), 0.2f);
}

}  // namespace
}  // namespace mptrain
