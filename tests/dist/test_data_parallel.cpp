// Data-parallel training as a user runs it: `mpirun -np 2 mptrain train ...` on this machine
// (CPU ranks, loopback), compared with single-process runs of the same global batch.
//
// Tolerances (fp32, --deterministic, d2 preset, 20 steps). Two ranks with accumulation A
// compute the same global gradient as one rank with 2A, but add the micro-batch gradients in
// another order (rank 0 sums windows 0, 2, …, rank 1 windows 1, 3, …, then the two sums are
// added), and oneDNN's accumulating GEMMs add each micro-batch inside their own loops; so
// results agree to fp32 rounding, not bit for bit:
//   - losses: relative 1e-6 (measured: identical to 9 digits at most steps, ≤ 7e-8 elsewhere)
//   - parameters: per tensor ‖a − b‖/‖b‖ ≤ 2e-6 (measured ≤ 6e-7), except the attention key
//     bias (the middle third of c_attn.bias): its gradient is zero in exact arithmetic (softmax
//     ignores a constant added to every key), so what it holds is AdamW's normalised rounding
//     noise, of size ~4e-6 in both runs; it is checked against an absolute 2e-5.
// Runs on the same world size (ZeRO-1 or not, resumed or not) are compared bit for bit.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

#include "dist/dist_test_util.h"
#include "io/checkpoint_dir.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::expect_losses_close;
using testing::expect_parameters_close;
using testing::mpirun;
using testing::read_losses;
using testing::run_command;
using testing::TempDir;
using testing::train;

constexpr const char* kMptrain = MPTRAIN_BINARY;

// Global batch: 4 windows of 2 x 32 tokens per step.
std::string args(const std::string& data, const std::string& run_dir) {
  return "train --preset d2 --device cpu --train-data '" + data + "/train_*.bin' --val-data '" + data +
         "/val_*.bin' --batch 2 --seq 32 --total-batch 256 --lr 3e-3 --warmup 2 --val-steps 2 --sample-tokens 4 "
         "--threads 1 --deterministic --seed 5 --run-dir " +
         run_dir;
}

class DataParallelTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed (scripts/setup.sh installs Open MPI)";
    testing::write_small_shards(tmp_.path());
  }
  TempDir tmp_;
};

TEST_F(DataParallelTraining, TwoRanksMatchOneRankWithTwiceTheAccumulation) {
  const std::string& d = tmp_.path();
  auto one = train(1, args(d, tmp_ / "one") + " --steps 20");  // 4 micro-batches per step
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto two = train(2, args(d, tmp_ / "two") + " --steps 20");  // 2 per rank
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("data parallel: 2 ranks (mpi"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("2 accumulation step(s) = 256 tokens/step"), std::string::npos) << two.output;
  auto zero = train(2, args(d, tmp_ / "zero") + " --steps 20 --zero 1");
  ASSERT_EQ(zero.exit_code, 0) << zero.output;
  EXPECT_NE(zero.output.find("ZeRO-1"), std::string::npos) << zero.output;

  const auto l1 = read_losses(tmp_ / "one"), l2 = read_losses(tmp_ / "two"), lz = read_losses(tmp_ / "zero");
  ASSERT_EQ(l1.size(), 20u);
  EXPECT_LT(l1.back().second, l1.front().second - 1.0);  // it learns
  expect_losses_close(l2, l1, 1e-6);
  expect_losses_close(lz, l1, 1e-6);
  expect_parameters_close(tmp_ / "two/step_00000020", tmp_ / "one/step_00000020");
  expect_parameters_close(tmp_ / "zero/step_00000020", tmp_ / "one/step_00000020");
  // Only rank 0 writes: one metrics line per step, one checkpoint.
  EXPECT_EQ(l2.size(), 20u);
}

class ZeroMatchesOneRank : public DataParallelTraining {
 protected:
  // `run_args(dir)` for `steps` steps on one rank, then on two ZeRO-1 ranks: the same losses and
  // parameters, and the run learns (its last loss at least `drop` below its first).
  template <class Args>
  void check(const Args& run_args, int steps, double drop) {
    auto one = train(1, run_args(tmp_ / "one"));
    ASSERT_EQ(one.exit_code, 0) << one.output;
    auto zero = train(2, run_args(tmp_ / "zero") + " --zero 1");
    ASSERT_EQ(zero.exit_code, 0) << zero.output;
    EXPECT_NE(zero.output.find("ZeRO-1"), std::string::npos) << zero.output;
    const auto l1 = read_losses(tmp_ / "one"), lz = read_losses(tmp_ / "zero");
    ASSERT_EQ(l1.size(), static_cast<size_t>(steps));
    EXPECT_LT(l1.back().second, l1.front().second - drop);  // it learns
    expect_losses_close(lz, l1, 1e-6);
    char last[32];
    std::snprintf(last, sizeof(last), "step_%08d", steps);
    expect_parameters_close(tmp_ / ("zero/" + std::string(last)), tmp_ / ("one/" + std::string(last)));
  }
};

// The Llama family (issue 40) through the same data-parallel step: Sophia-G under ZeRO-1 on two
// ranks, with QK-norm and the ReLU² MLP, is the one-rank run of twice the accumulation.
TEST_F(ZeroMatchesOneRank, LlamaWithSophia) {
  check(
      [&](const std::string& dir) {
        std::string a = args(tmp_.path(), dir);
        a.replace(a.find("--preset d2"), 11, "--model llama --preset llama-tiny --qk-norm --mlp relu2");
        return a + " --steps 10 --optimizer sophia";
      },
      10, 0.5);
}

// Muon under ZeRO-1: each rank orthogonalises the whole matrices of its shard, then the
// parameters are all-gathered; the same run as one rank with twice the accumulation.
TEST_F(ZeroMatchesOneRank, Muon) {
  check([&](const std::string& dir) { return args(tmp_.path(), dir) + " --steps 12 --optimizer muon"; }, 12,
        1.0);
}

TEST_F(DataParallelTraining, ResumeOnTwoRanksReproducesTheUninterruptedRun) {
  const std::string& d = tmp_.path();
  for (const char* zero : {"0", "1"}) {
    SCOPED_TRACE(std::string("--zero ") + zero);
    const std::string a = tmp_ / (std::string("a") + zero), b = tmp_ / (std::string("b") + zero);
    auto full = train(2, args(d, a) + " --steps 12 --save-every 6 --zero " + zero);
    ASSERT_EQ(full.exit_code, 0) << full.output;
    auto resumed = train(2, args(d, b) + " --steps 12 --zero " + zero + " --resume " + a + "/step_00000006");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
    const auto la = read_losses(a), lb = read_losses(b);
    ASSERT_EQ(la.size(), 12u);
    ASSERT_EQ(lb.size(), 6u);
    for (size_t i = 0; i < lb.size(); ++i) {
      EXPECT_EQ(lb[i].first, la[6 + i].first);
      EXPECT_EQ(lb[i].second, la[6 + i].second) << "step " << lb[i].first;  // bit for bit
    }
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      auto same = run_command("cmp " + a + "/step_00000012/" + file + " " + b + "/step_00000012/" + file);
      EXPECT_EQ(same.exit_code, 0) << file << ": " << same.output;
    }
  }
}

// The reduction overlapped with the backward (--overlap-grad-reduce on: each range reduced as the
// backward hands it, on its last micro-batch and in Sophia's curvature pass; the path NCCL takes
// between GPUs) leaves the same bits as one reduction after the backward: with two ranks every
// sum is a + b whichever collective makes it. Under ZeRO-1 each range goes to the ranks whose
// shards it crosses; under the GPU's plan the 16-bit gradients are widened before the hook. With
// --graphs on the passes are replayed from a graph and the ranges reduced after each replay.
TEST_F(DataParallelTraining, ReducingEachRangeAsTheBackwardEndsItChangesNoBit) {
  const std::string& d = tmp_.path();
  const char* cases[] = {"--zero 0", "--zero 1 --optimizer sophia --sophia-k 2",
                         "--zero 1 --precision bf16 --policy-of cuda",
                         "--zero 1 --precision bf16 --policy-of cuda --graphs on"};
  for (const std::string extra : cases) {
    SCOPED_TRACE(extra);
    const std::string after = tmp_ / "after", during = tmp_ / "during";
    fs::remove_all(after);
    fs::remove_all(during);
    auto a = train(2, args(d, after) + " --steps 6 " + extra + " --overlap-grad-reduce off");
    ASSERT_EQ(a.exit_code, 0) << a.output;
    EXPECT_NE(a.output.find("gradients reduced after the backward"), std::string::npos) << a.output;
    auto b = train(2, args(d, during) + " --steps 6 " + extra + " --overlap-grad-reduce on");
    ASSERT_EQ(b.exit_code, 0) << b.output;
    const bool graphs = extra.find("--graphs on") != std::string::npos;
    EXPECT_NE(b.output.find(graphs ? "gradients reduced range by range after each graph replay"
                                   : "gradients reduced during the backward"),
              std::string::npos)
        << b.output;
    const auto la = read_losses(after), lb = read_losses(during);
    ASSERT_EQ(la.size(), 6u);
    EXPECT_EQ(la, lb);
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      auto same =
          run_command("cmp " + after + "/step_00000006/" + file + " " + during + "/step_00000006/" + file);
      EXPECT_EQ(same.exit_code, 0) << file << ": " << same.output;
    }
  }
}

TEST_F(DataParallelTraining, ResumesOnAnotherWorldSize) {
  const std::string& d = tmp_.path();
  // Written by 2 ZeRO-1 ranks (shards gathered), continued by 1 rank: the same global batch.
  auto two = train(2, args(d, tmp_ / "two") + " --steps 12 --save-every 6 --zero 1");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  auto one = train(1, args(d, tmp_ / "one") + " --steps 12 --resume " + (tmp_ / "two/step_00000006"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto l2 = read_losses(tmp_ / "two"), l1 = read_losses(tmp_ / "one");
  ASSERT_EQ(l1.size(), 6u);
  expect_losses_close(l1, std::vector(l2.begin() + 6, l2.end()), 1e-6);
  expect_parameters_close(tmp_ / "one/step_00000012", tmp_ / "two/step_00000012");
  // And the other way: a single-process checkpoint split into ZeRO-1 shards on 2 ranks.
  auto single = train(1, args(d, tmp_ / "single") + " --steps 12 --save-every 6");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  auto from_single =
      train(2, args(d, tmp_ / "from_single") + " --steps 12 --zero 1 --resume " + (tmp_ / "single/step_00000006"));
  ASSERT_EQ(from_single.exit_code, 0) << from_single.output;
  const auto ls = read_losses(tmp_ / "single"), lfs = read_losses(tmp_ / "from_single");
  expect_losses_close(lfs, std::vector(ls.begin() + 6, ls.end()), 1e-6);
  expect_parameters_close(tmp_ / "from_single/step_00000012", tmp_ / "single/step_00000012");
}

TEST_F(DataParallelTraining, BatchThatRanksCannotShareIsRefused) {
  // 256 tokens per step cannot be split into 3 ranks' 2 x 32 micro-batches.
  auto r = train(3, args(tmp_.path(), tmp_ / "bad") + " --steps 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("x ranks = 2 x 32 x 3"), std::string::npos) << r.output;
}

// Starts `mpirun -np 2 mptrain train ...` in the background, waits for a few steps, sends a
// signal to one rank or to mpirun and returns (exit status, seconds from then until mpirun
// ended, output).
struct Outcome {
  int status = -1;
  double seconds = 0;
  std::string output;
};

// target: the rank to signal, or -1 for mpirun itself.
Outcome disturb(const std::string& data, const std::string& run_dir, double timeout_s, int signal, int target,
                const std::string& extra_args = "") {
  const std::string log = run_dir + ".log";
  const std::string cmd = "exec " + mpirun(2) + " " + kMptrain + " " + args(data, run_dir) +
                          " --steps 100000 --log-every 1 --collective-timeout " + std::to_string(timeout_s) + " " +
                          extra_args + " > " + log + " 2>&1";
  Outcome out;
  const pid_t pid = ::fork();
  if (pid < 0) return out;
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // A few steps in: every rank is past start-up and inside the training loop.
  for (int i = 0; i < 1200 && read_losses(run_dir).size() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const pid_t victim = target < 0 ? pid : testing::find_rank_pid(run_dir, target);
  EXPECT_GT(victim, 0) << "rank " << target << " not found";
  if (victim > 0) ::kill(victim, signal);
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  bool ended = false;
  while (!ended && std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(timeout_s + 60.0)) {
    ended = ::waitpid(pid, &status, WNOHANG) == pid;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!ended) {  // the job hangs: clean up, report
    ::kill(pid, SIGKILL);
    if (victim > 0) ::kill(victim, SIGKILL);
    const pid_t rank0 = testing::find_rank_pid(run_dir, 0);
    if (rank0 > 0) ::kill(rank0, SIGKILL);
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << "mpirun still running " << out.seconds << " s after it or a rank was signalled";
  }
  if (target >= 0 && victim > 0) ::kill(victim, SIGKILL);  // a stopped rank may outlive mpirun
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  out.output = testing::read_text(log);
  return out;
}

TEST_F(DataParallelTraining, KilledRankStopsTheSurvivor) {
  const Outcome o = disturb(tmp_.path(), tmp_ / "run", 30.0, SIGKILL, 1);
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_LT(o.seconds, 30.0) << o.output;  // within the collective timeout
  EXPECT_NE(o.output.find("signal 9"), std::string::npos) << o.output;  // mpirun names the dead rank
}

TEST_F(DataParallelTraining, HungRankTripsTheCollectiveTimeout) {
  // SIGSTOP: rank 1 is alive but silent, so only rank 0's collective timeout can end the job.
  const Outcome o = disturb(tmp_.path(), tmp_ / "run", 4.0, SIGSTOP, 1);
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_GE(o.seconds, 3.0) << o.output;
  EXPECT_LT(o.seconds, 4.0 + 30.0) << o.output;
  EXPECT_NE(o.output.find("mptrain: error: rank 0 of 2: collective"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("did not complete within 4 s (--collective-timeout)"), std::string::npos) << o.output;
}

TEST_F(DataParallelTraining, SigtermStopsEveryRankAfterTheSameStepWithACheckpoint) {
  // mpirun passes SIGTERM on to the ranks, which agree on the step to stop after, write one
  // ZeRO-1 checkpoint (gathered) and stop; any world size resumes from it.
  const std::string run = tmp_ / "run";
  const Outcome o = disturb(tmp_.path(), run, 60.0, SIGTERM, -1, "--zero 1");
  EXPECT_NE(o.output.find("stopped by SIGTERM after step"), std::string::npos) << o.output;
  const auto losses = read_losses(run);
  ASSERT_FALSE(losses.empty()) << o.output;
  const std::string ckpt = run + "/" + checkpoint_name(losses.back().first);
  ASSERT_TRUE(fs::exists(ckpt + "/optimizer.safetensors")) << o.output;
  auto resumed = train(1, args(tmp_.path(), tmp_ / "resumed") + " --steps " +
                              std::to_string(losses.back().first + 2) + " --resume " + run);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(read_losses(tmp_ / "resumed").size(), 2u) << resumed.output;
}

}  // namespace
}  // namespace mptrain
