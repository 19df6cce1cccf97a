// Checkpoint and resume at the level a user feels: `mptrain train` as a subprocess.
//  - resuming from a mid-run checkpoint reproduces the uninterrupted run's losses bit for bit
//  - resuming a finished run says it is complete and trains nothing
//  - a run killed with SIGKILL while writing checkpoints leaves a resumable latest checkpoint
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "io/checkpoint_dir.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::read_losses;
using testing::run_mptrain;
using testing::TempDir;

std::string base_args(const std::string& data) {
  return "train --preset d2 --train-data '" + data + "/train_*.bin' --val-data '" + data +
         "/val_*.bin' --batch 2 --seq 32 --lr 3e-3 --warmup 2 --val-steps 2 --sample-tokens 4 --threads 2 "
         "--deterministic --seed 5";
}

TEST(Resume, ContinuesTheExactTrajectory) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  // Uninterrupted: 12 steps, checkpoint every 6 (with accumulation, to cover its state too).
  auto a = run_mptrain(base_args(tmp.path()) + " --total-batch 128 --steps 12 --save-every 6 --run-dir " + (tmp / "a"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  // Resume from step 6 of run a into a new run dir.
  auto b = run_mptrain(base_args(tmp.path()) + " --total-batch 128 --steps 12 --run-dir " + (tmp / "b") + " --resume " +
                       (tmp / "a/step_00000006"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto la = read_losses(tmp / "a"), lb = read_losses(tmp / "b");
  ASSERT_EQ(la.size(), 12u);
  ASSERT_EQ(lb.size(), 6u);
  for (size_t i = 0; i < lb.size(); ++i) {
    EXPECT_EQ(lb[i].first, la[6 + i].first);
    EXPECT_EQ(lb[i].second, la[6 + i].second) << "step " << lb[i].first;  // bit for bit (printed with %.9g)
  }
  // The final checkpoints hold identical weights.
  auto ma = testing::run_command("cmp " + (tmp / "a/step_00000012/model.safetensors") + " " +
                                 (tmp / "b/step_00000012/model.safetensors"));
  EXPECT_EQ(ma.exit_code, 0) << ma.output;
  // Resuming the finished run says it is complete, names its checkpoint and trains nothing: no
  // zero-filled "done: 0/12 steps" summary, no new metrics record.
  auto c = run_mptrain(base_args(tmp.path()) + " --total-batch 128 --steps 12 --run-dir " + (tmp / "a") +
                       " --resume " + (tmp / "a"));
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("run complete: checkpoint"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("step_00000012 is at step 12 of --steps 12"), std::string::npos) << c.output;
  EXPECT_EQ(c.output.find("done:"), std::string::npos) << c.output;
  EXPECT_EQ(read_losses(tmp / "a").size(), la.size());
}

// --shuffle: the order's epoch and index travel in state.json, so a resumed run reads the same
// sequences (across an epoch boundary: 400 tokens are 12 sequences of 32, 6 steps of 2); resuming it
// without --shuffle is refused in one line, before any step.
TEST(Resume, ShuffledDataContinuesTheExactTrajectory) {
  TempDir tmp;
  testing::write_small_shards(tmp.path(), 400);
  const std::string args = base_args(tmp.path()) + " --shuffle --steps 10";
  auto a = run_mptrain(args + " --save-every 4 --run-dir " + (tmp / "a"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("shard(s), shuffled"), std::string::npos) << a.output;
  auto b = run_mptrain(args + " --run-dir " + (tmp / "b") + " --resume " + (tmp / "a/step_00000004"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto la = read_losses(tmp / "a"), lb = read_losses(tmp / "b");
  ASSERT_EQ(la.size(), 10u);
  ASSERT_EQ(lb.size(), 6u);
  for (size_t i = 0; i < lb.size(); ++i) EXPECT_EQ(lb[i].second, la[4 + i].second) << "step " << lb[i].first;
  // The order differs from the sequential one (the same seed and data, without --shuffle).
  auto s = run_mptrain(base_args(tmp.path()) + " --steps 10 --run-dir " + (tmp / "s"));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(read_losses(tmp / "s")[1].second, la[1].second);
  auto c = run_mptrain(base_args(tmp.path()) + " --steps 10 --run-dir " + (tmp / "c") + " --resume " +
                       (tmp / "a/step_00000004"));
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.output.find("taken in shuffled (--shuffle) order, and this run reads its data in sequential order; "
                          "pass --shuffle to resume it"),
            std::string::npos)
      << c.output;
}

TEST(Resume, SigkillDuringCheckpointWritesLeavesPreviousCheckpointIntact) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string run = tmp / "run";
  // Checkpoint at every step so that a kill lands inside a write with high probability.
  const std::string cmd = std::string(MPTRAIN_BINARY) + " " + base_args(tmp.path()) +
                          " --steps 100000 --save-every 1 --keep-last 2 --run-dir " + run + " > /dev/null 2>&1";
  for (int attempt = 0; attempt < 3; ++attempt) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Wait until at least one checkpoint exists, then kill at an arbitrary moment.
    for (int i = 0; i < 600 && !fs::exists(run + "/latest"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(137 * (attempt + 1)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the trainer ended by itself";

    const std::string ckpt = resolve_checkpoint(run);
    // Resume for real for a couple of steps: load must succeed and training continue.
    const std::string step_name = fs::path(ckpt).filename().string();
    const int64_t step = std::stoll(step_name.substr(5));
    auto r = run_mptrain(base_args(tmp.path()) + " --steps " + std::to_string(step + 2) + " --run-dir " +
                         (tmp / "resumed") + " --resume " + run);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
    fs::remove_all(tmp / "resumed");
  }
}

}  // namespace
}  // namespace mptrain
