// `mptrain train --device cuda --model bert` end to end (the CUDA backend under the one model and step):
// bert-tiny trained for 10 steps on GPU 0 and, from the same initialisation and instances, on the CPU; their
// per-step losses in metrics.jsonl agree (relative: fp32 1e-4, bf16 3e-2, as the GPT-2 device runs), with
// AdamW and with Sophia (--sophia-k 5: a curvature pass on the device at steps 5 and 10). A rerun and ZeRO-1
// on one GPU (fp32, and bf16 for AdamW) against the plain device run (relative 1e-6; checkpoints' parameters
// too), and on two GPUs 2 ranks against 1 rank with twice the accumulation (1e-4, the GPT-2 device test's:
// another reduction order; bf16 ZeRO-1 1e-2, its checkpoints' parameters too). Skipped without a GPU (and
// without Debian's fortunes, the instances' text).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/checkpoint_diff.h"
#include "cuda/gpu_test_util.h"
#include "dist/dist_test_util.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::read_losses;
using testing::run_mptrain;

class TrainBertDeviceGpu : public testing::BertDataSuite {
 protected:
  static std::string args(const std::string& run, const std::string& device, const std::string& precision,
                          const std::string& extra = "") {
    return "train --model bert --preset bert-tiny --data " + data() +
           " --batch 8 --max-predictions 5 --lr 1e-3 --warmup 2 --seed 7 --threads 2 --deterministic"
           " --progress none --steps 10 --device " +
           device + " --precision " + precision + " --run-dir " + run_dir(run) + " " + extra;
  }
  // Runs the CPU and the GPU and compares their per-step losses.
  static void compare(const std::string& name, const std::string& precision, const std::string& extra,
                      double tol) {
    const auto cpu = run_mptrain(args(name + "_cpu", "cpu", precision, extra));
    ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
    const auto gpu = run_mptrain(args(name + "_gpu", "cuda", precision, extra));
    ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
    expect_same_losses(name + "_gpu", name + "_cpu", tol);
  }
  // Run a's per-step losses against run b's (the reference), relative tol.
  static void expect_same_losses(const std::string& a, const std::string& b, double tol) {
    const auto lb = read_losses(run_dir(b)), la = read_losses(run_dir(a));
    ASSERT_EQ(lb.size(), la.size()) << a;
    ASSERT_FALSE(lb.empty()) << a;
    for (size_t i = 0; i < lb.size(); ++i) {
      EXPECT_EQ(lb[i].first, la[i].first) << a;
      EXPECT_TRUE(std::isfinite(la[i].second)) << a << " step " << la[i].first;
      EXPECT_LE(std::fabs(la[i].second - lb[i].second), tol * std::fabs(lb[i].second))
          << a << " step " << lb[i].first << ": " << la[i].second << ", " << b << " " << lb[i].second;
    }
  }
};

TEST_F(TrainBertDeviceGpu, AdamWLossesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  compare("adamw_fp32", "fp32", "", 1e-4);
  compare("adamw_bf16", "bf16", "", 3e-2);
}

TEST_F(TrainBertDeviceGpu, SophiaLossesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  compare("sophia_fp32", "fp32", "--optimizer sophia --sophia-k 5", 1e-4);
}

// A rerun, and ZeRO-1 on a world of one (its collectives run over host copies of the GPU's
// buffers), equal the plain run, its checkpoints' parameters too.
TEST_F(TrainBertDeviceGpu, WorldOneEqualsThePlainRun) {
  SKIP_WITHOUT_GPU();
  for (const std::string name : {"adamw", "sophia", "adamw_bf16"}) {
    SCOPED_TRACE(name);
    const std::string precision = name == "adamw_bf16" ? "bf16" : "fp32";
    const std::string extra =
        std::string(name == "sophia" ? "--optimizer sophia --sophia-k 5" : "") + " --save-every 5";
    const auto plain = run_mptrain(args(name + "_plain", "cuda", precision, extra));
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    const auto again = run_mptrain(args(name + "_again", "cuda", precision, extra));
    ASSERT_EQ(again.exit_code, 0) << again.output;
    const auto zero = run_mptrain(args(name + "_zero", "cuda", precision, extra + " --zero 1"));
    ASSERT_EQ(zero.exit_code, 0) << zero.output;
    expect_same_losses(name + "_again", name + "_plain", 1e-6);
    expect_same_losses(name + "_zero", name + "_plain", 1e-6);
    for (const int64_t step : {5, 10})
      EXPECT_LT(testing::checkpoint_params_error(run_dir(name + "_zero"), run_dir(name + "_plain"), step), 1e-6)
          << "step " << step;
  }
}

// Two GPUs: mpirun -np 2 (each rank its GPU and half of each global batch) against one rank with
// twice the accumulation (--total-batch 512: 2 micro-batches of 8 x 32 on one rank, 1 per rank).
// bf16 with ZeRO-1 gathers only the 16-bit copy, so rank 0's copy of rank 1's fp32 masters goes
// stale: the step-5 and step-10 checkpoints must gather them first and match the one-rank run's.
TEST_F(TrainBertDeviceGpu, TwoRanksMatchOneRank) {
  SKIP_WITHOUT_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  if (!testing::have_mpirun()) GTEST_SKIP() << "no mpirun";
  const auto one = run_mptrain(args("dp_one", "cuda", "fp32", "--total-batch 512"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  for (const std::string zero : {"0", "1"}) {
    const auto two =
        testing::run_command(testing::mpirun(2) + " " + MPTRAIN_BINARY + " " +
                             args("dp_two" + zero, "cuda", "fp32", "--total-batch 512 --zero " + zero));
    ASSERT_EQ(two.exit_code, 0) << two.output;
    expect_same_losses("dp_two" + zero, "dp_one", 1e-4);
  }
  const std::string bf16 = "--total-batch 512 --save-every 5";
  const auto one16 = run_mptrain(args("dp_one16", "cuda", "bf16", bf16));
  ASSERT_EQ(one16.exit_code, 0) << one16.output;
  const auto two16 = testing::run_command(testing::mpirun(2) + " " + MPTRAIN_BINARY + " " +
                                          args("dp_two16", "cuda", "bf16", bf16 + " --zero 1"));
  ASSERT_EQ(two16.exit_code, 0) << two16.output;
  expect_same_losses("dp_two16", "dp_one16", 1e-2);
  for (const int64_t step : {5, 10})
    EXPECT_LT(testing::checkpoint_params_error(run_dir("dp_two16"), run_dir("dp_one16"), step), 1e-2)
        << "step " << step;
}

}  // namespace
}  // namespace mptrain
