// `mptrain train --device cuda` end to end (the CUDA backend under the one model and step): a tiny GPT-2
// trained for 20 steps on GPU 0 and, from the same initialisation and data, on the CPU; their per-step losses
// in metrics.jsonl agree (relative: fp32 1e-4, tf32 1e-2, bf16/fp16 3e-2, the tolerances of
// test_gpt2_device_gpu.cpp). Two micro-batches per step (--total-batch) run the gradient
// accumulation path. A run resumed on the GPU from its step-10 checkpoint reproduces the
// uninterrupted run's losses (relative 1e-6; AdamW moments restarted from zero, or a lost fp16
// loss scale, move them by far more). Sophia (--sophia-k 5, so steps 5, 10, 15, 20 make a
// curvature pass on the device): the same comparisons, plus the Hessian records (hessian_loss,
// win_rate) at the same steps as the CPU's and close to them, and a resume from step 10 that
// carries m, h and the label counter. A rerun reproduces a run (the device step is
// deterministic), ZeRO-1 on one GPU equals the plain run (AdamW and Sophia, fp32 and the 16-bit
// precisions, its checkpoints' parameters included), and a ZeRO-1 checkpoint resumed without
// ZeRO reproduces the run (the state gathered whole); with two GPUs, the same under mpirun -np 2
// against one rank (gradients averaged over NCCL during the backward, or over MPI).
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
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
using testing::TempDir;

std::string args(const TempDir& tmp, const std::string& precision, const std::string& device, const std::string& run) {
  return "train --preset d2 --train-data '" + (tmp / "train_*.bin") + "' --val-data '" + (tmp / "val_*.bin") +
         "' --batch 2 --seq 32 --total-batch 128 --steps 20 --lr 1e-3 --warmup 2 --val-steps 2 --sample-tokens 4"
         " --seed 7 --threads 2 --deterministic --progress none --precision " +
         precision + " --device " + device + " --run-dir " + (tmp / run);
}

double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-12); }

const char* kSophia = " --optimizer sophia --sophia-k 5";

// A metrics.jsonl field of every record that has it, by step.
std::map<int64_t, double> read_field(const std::string& run_dir, const std::string& key) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::map<int64_t, double> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains(key)) out[j["step"].get<int64_t>()] = j[key].get<double>();
  }
  return out;
}

// Sophia: the curvature steps and their records agree (the win rate is a count over coordinates
// near the clip bound, so it gets an absolute tolerance).
void compare_curvature(const std::string& gpu_dir, const std::string& cpu_dir, double tol) {
  const auto hg = read_field(gpu_dir, "hessian_loss"), hc = read_field(cpu_dir, "hessian_loss");
  const auto wg = read_field(gpu_dir, "win_rate"), wc = read_field(cpu_dir, "win_rate");
  ASSERT_EQ(hc.size(), 4u) << "the CPU run made no curvature pass every 5 steps";
  ASSERT_EQ(hg.size(), hc.size()) << "the GPU run's curvature steps differ from the CPU's";
  for (const auto& [step, loss] : hc) {
    ASSERT_TRUE(hg.count(step)) << "no curvature pass on the GPU at step " << step;
    EXPECT_LT(rel(hg.at(step), loss), tol) << "hessian_loss at step " << step;
    EXPECT_NEAR(wg.at(step), wc.at(step), 0.05) << "win_rate at step " << step;
  }
}

void compare_with_cpu(const std::string& precision, double tol, const std::string& more = "") {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  // fp16: a loss scale low enough that neither run skips a step (a skip on one side only
  // would be a trajectory difference, not an error).
  const std::string extra = (precision == "fp16" ? " --loss-scale-init 1024" : "") + more;
  const auto gpu = run_mptrain(args(tmp, precision, "cuda", "gpu") + extra);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  EXPECT_NE(gpu.output.find("device cuda"), std::string::npos) << gpu.output;
  const auto cpu = run_mptrain(args(tmp, precision, "cpu", "cpu") + extra);
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  const auto lg = read_losses(tmp / "gpu"), lc = read_losses(tmp / "cpu");
  ASSERT_EQ(lg.size(), 20u);
  ASSERT_EQ(lc.size(), 20u);
  for (size_t i = 0; i < lg.size(); ++i) {
    EXPECT_EQ(lg[i].first, lc[i].first);
    EXPECT_TRUE(std::isfinite(lg[i].second)) << "step " << lg[i].first;
    EXPECT_LT(rel(lg[i].second, lc[i].second), tol)
        << precision << " step " << lg[i].first << ": gpu " << lg[i].second << " cpu " << lc[i].second;
  }
  EXPECT_LT(lg.back().second, lg.front().second) << "the GPU run did not learn";
  if (!more.empty()) compare_curvature(tmp / "gpu", tmp / "cpu", tol);
}

TEST(TrainDeviceGpu, Fp32LossesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  compare_with_cpu("fp32", 1e-4);
}
TEST(TrainDeviceGpu, Tf32LossesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  compare_with_cpu("tf32", 1e-2);
}
TEST(TrainDeviceGpu, Bf16LossesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  compare_with_cpu("bf16", 3e-2);
}
TEST(TrainDeviceGpu, Fp16LossesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  compare_with_cpu("fp16", 3e-2);
}

void resume_reproduces(const std::string& precision, const std::string& more = "") {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const auto a = run_mptrain(args(tmp, precision, "cuda", "a") + more + " --save-every 10");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto b = run_mptrain(args(tmp, precision, "cuda", "b") + more + " --resume " + (tmp / "a/step_00000010"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto la = read_losses(tmp / "a"), lb = read_losses(tmp / "b");
  ASSERT_EQ(la.size(), 20u);
  ASSERT_EQ(lb.size(), 10u);
  for (size_t i = 0; i < lb.size(); ++i) {
    EXPECT_EQ(lb[i].first, la[10 + i].first);
    EXPECT_LT(rel(lb[i].second, la[10 + i].second), 1e-6)
        << precision << " step " << lb[i].first << ": resumed " << lb[i].second << " uninterrupted "
        << la[10 + i].second;
  }
}

TEST(TrainDeviceGpu, Fp32ResumeReproducesTheRun) {
  SKIP_WITHOUT_GPU();
  resume_reproduces("fp32");
}
TEST(TrainDeviceGpu, Fp16ResumeReproducesTheRun) {  // the loss scaler's state travels too
  SKIP_WITHOUT_GPU();
  resume_reproduces("fp16");
}

// Two runs' losses, step by step, within tol (relative).
void expect_same_losses(const std::string& a_dir, const std::string& b_dir, double tol, size_t steps = 20) {
  const auto la = read_losses(a_dir), lb = read_losses(b_dir);
  ASSERT_EQ(la.size(), steps);
  ASSERT_EQ(lb.size(), steps);
  for (size_t i = 0; i < steps; ++i)
    EXPECT_LT(rel(la[i].second, lb[i].second), tol)
        << "step " << la[i].first << ": " << la[i].second << " vs " << lb[i].second;
}

// A rerun and ZeRO-1 (over an NCCL communicator of one rank) on one GPU against the plain device
// run: a world of one averages nothing, so the losses and the saved parameters agree to rounding.
// Samples every 5 steps and a checkpoint at step 10 download the parameters mid-run.
void world_one_equals_plain(const std::string& precision, std::string more) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  more += " --sample-every 5 --save-every 10";
  if (precision == "fp16") more += " --loss-scale-init 1024";
  const auto plain = run_mptrain(args(tmp, precision, "cuda", "plain") + more);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto again = run_mptrain(args(tmp, precision, "cuda", "again") + more);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const auto zero =
      run_mptrain(args(tmp, precision, "cuda", "zero") + more + " --zero 1 --dist-backend nccl");
  ASSERT_EQ(zero.exit_code, 0) << zero.output;
  expect_same_losses(tmp / "again", tmp / "plain", 1e-6);
  expect_same_losses(tmp / "zero", tmp / "plain", 1e-6);
  for (const int64_t step : {10, 20})
    EXPECT_LT(testing::checkpoint_params_error(tmp / "zero", tmp / "plain", step), 1e-6) << "step " << step;
}

TEST(TrainDeviceGpu, WorldOneEqualsThePlainRun) {
  SKIP_WITHOUT_GPU();
  world_one_equals_plain("fp32", "");
}
TEST(TrainDeviceGpu, WorldOneSophiaBf16EqualsThePlainRun) {
  SKIP_WITHOUT_GPU();
  world_one_equals_plain("bf16", kSophia);
}
// AdamW in the 16-bit precisions: ZeRO-1 gathers the 16-bit copy (bf16 and fp16 bits alike).
TEST(TrainDeviceGpu, WorldOne16BitEqualsThePlainRun) {
  SKIP_WITHOUT_GPU();
  for (const std::string precision : {"bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    world_one_equals_plain(precision, "");
  }
}

// CUDA graphs (--graphs on): each micro-batch's pass replayed from a graph captured on its second
// run gives the enqueued run's losses and parameters, in every precision and with Sophia's eager
// curvature passes between the replays; validation and samples run eagerly between them too.
TEST(TrainDeviceGpu, GraphsReplayTheEnqueuedRun) {
  SKIP_WITHOUT_GPU();
  for (const std::string c : {"fp32", "bf16", "fp16", "bf16 --optimizer sophia --sophia-k 5"}) {
    SCOPED_TRACE(c);
    TempDir tmp;
    testing::write_small_shards(tmp.path());
    const std::string more = std::string(" --sample-every 5 --val-every 5 --save-every 20") +
                             (c == "fp16" ? " --loss-scale-init 1024" : "");
    const auto plain = run_mptrain(args(tmp, c, "cuda", "plain") + more);
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    const auto graphs = run_mptrain(args(tmp, c, "cuda", "graphs") + more + " --graphs on");
    ASSERT_EQ(graphs.exit_code, 0) << graphs.output;
    EXPECT_NE(graphs.output.find("graphs on"), std::string::npos) << graphs.output;
    expect_same_losses(tmp / "graphs", tmp / "plain", 1e-6);
    EXPECT_LT(testing::checkpoint_params_error(tmp / "graphs", tmp / "plain", 20), 1e-6);
  }
}

// A ZeRO-1 run's step-10 checkpoint resumed by a plain run (another world layout) gives the
// uninterrupted run's losses: the checkpoint holds the whole optimizer state.
TEST(TrainDeviceGpu, ZeroCheckpointResumesWithoutZero) {
  SKIP_WITHOUT_GPU();
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string zero = std::string(kSophia) + " --zero 1";
  const auto a = run_mptrain(args(tmp, "fp32", "cuda", "a") + zero + " --save-every 10");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto b = run_mptrain(args(tmp, "fp32", "cuda", "b") + kSophia + " --resume " + (tmp / "a/step_00000010"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto la = read_losses(tmp / "a"), lb = read_losses(tmp / "b");
  ASSERT_EQ(lb.size(), 10u);
  for (size_t i = 0; i < lb.size(); ++i)
    EXPECT_LT(rel(lb[i].second, la[10 + i].second), 1e-6) << "step " << lb[i].first;
}

// Two GPUs: mpirun -np 2 (each rank its GPU and half of each global batch) against one rank with
// the same global batch; ZeRO-1 and not, over NCCL (the default between GPU ranks) with each
// range reduced during the backward, and once over MPI through host copies. Reduction order
// differs: the CPU DP tolerance. bf16 with ZeRO-1, samples every 5 steps and checkpoints at 10
// and 20: the saved parameters match the one-rank run's.
TEST(TrainDeviceGpu, TwoRanksMatchOneRank) {
  SKIP_WITHOUT_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  if (!testing::have_mpirun()) GTEST_SKIP() << "no mpirun";
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const auto one = run_mptrain(args(tmp, "fp32", "cuda", "one"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  for (const std::string zero : {"0", "1"}) {
    const auto two = testing::run_command(testing::mpirun(2) + " " + MPTRAIN_BINARY + " " +
                                 args(tmp, "fp32", "cuda", "two" + zero) + " --zero " + zero);
    ASSERT_EQ(two.exit_code, 0) << two.output;
    EXPECT_NE(two.output.find("(nccl"), std::string::npos) << two.output;
    EXPECT_NE(two.output.find("gradients reduced during the backward"), std::string::npos) << two.output;
    expect_same_losses(tmp / ("two" + zero), tmp / "one", 1e-4);
  }
  const auto mpi = testing::run_command(testing::mpirun(2) + " " + MPTRAIN_BINARY + " " +
                                        args(tmp, "fp32", "cuda", "mpi") + " --zero 1 --dist-backend mpi");
  ASSERT_EQ(mpi.exit_code, 0) << mpi.output;
  EXPECT_NE(mpi.output.find("(mpi through host copies"), std::string::npos) << mpi.output;
  expect_same_losses(tmp / "mpi", tmp / "one", 1e-4);
  const std::string mid = " --sample-every 5 --save-every 10";
  const auto one16 = run_mptrain(args(tmp, "bf16", "cuda", "one16") + mid);
  ASSERT_EQ(one16.exit_code, 0) << one16.output;
  const auto two16 = testing::run_command(testing::mpirun(2) + " " + MPTRAIN_BINARY + " " +
                                          args(tmp, "bf16", "cuda", "two16") + mid + " --zero 1");
  ASSERT_EQ(two16.exit_code, 0) << two16.output;
  expect_same_losses(tmp / "two16", tmp / "one16", 1e-2);
  for (const int64_t step : {10, 20})
    EXPECT_LT(testing::checkpoint_params_error(tmp / "two16", tmp / "one16", step), 1e-2) << "step " << step;
}

TEST(TrainDeviceGpu, SophiaFp32MatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  compare_with_cpu("fp32", 1e-4, kSophia);
}
TEST(TrainDeviceGpu, SophiaBf16MatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  compare_with_cpu("bf16", 3e-2, kSophia);
}
TEST(TrainDeviceGpu, SophiaFp16MatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  compare_with_cpu("fp16", 3e-2, kSophia);
}
TEST(TrainDeviceGpu, SophiaResumeReproducesTheRun) {  // m, h and the label counter travel
  SKIP_WITHOUT_GPU();
  resume_reproduces("fp32", kSophia);
}

}  // namespace
// A run that cannot fit the GPU is refused before anything is allocated, against the GPU's free
// memory (not the host's), naming it and the largest batch that fits; --memory-limit still wins.
TEST(TrainDeviceGpu, ABatchBeyondTheGpusMemoryIsRefusedByTheEstimate) {
  SKIP_WITHOUT_GPU();
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string big = "train --preset gpt2 --train-data '" + (tmp / "train_*.bin") +
                          "' --batch 4096 --seq 1024 --steps 1 --precision bf16 --device cuda -q --run-dir " +
                          (tmp / "big");
  const auto r = run_mptrain(big);
  testing::expect_clear_error(r, "free memory of GPU 0");
  EXPECT_NE(r.output.find("the largest batch that fits is --batch"), std::string::npos) << r.output;
  testing::expect_clear_error(run_mptrain(big + " --memory-limit 1G"), "is available (--memory-limit)");
}

}  // namespace mptrain
