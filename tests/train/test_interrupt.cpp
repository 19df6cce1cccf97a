// Ctrl-C and SIGTERM during training, as a user meets them: the run finishes its step,
// writes a checkpoint although none was due, prints how to resume, and exits with
// 128 + the signal (130 for SIGINT, 143 for SIGTERM); `--resume` then continues from
// that step in the same run dir. A second Ctrl-C quits at once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "io/checkpoint_dir.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::read_losses;
using testing::run_mptrain;
using testing::TempDir;

std::string base_args(const TempDir& tmp) {
  return "train --preset d2 --train-data '" + (tmp / "train_*.bin") +
         "' --batch 2 --seq 32 --lr 3e-3 --warmup 2 --sample-tokens 4 --threads 2 --deterministic --seed 5 "
         "--log-every 1 --run-dir " +
         (tmp / "run");
}

size_t metrics_lines(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

struct Child {
  pid_t pid = -1;
  std::string log;
};

// Starts `mptrain ARGS` with stdout+stderr to a log file and the default disposition of
// SIGINT/SIGTERM (a test runner may have started us ignoring them).
Child start(const std::string& args, const std::string& log) {
  Child c;
  c.log = log;
  c.pid = ::fork();
  if (c.pid == 0) {
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    const std::string cmd = "exec " + std::string(MPTRAIN_BINARY) + " " + args + " > " + log + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return c;
}

// Waits for a few completed steps (records in metrics.jsonl); no checkpoint is due yet.
bool wait_for_steps(const std::string& run_dir, size_t steps) {
  for (int i = 0; i < 1200; ++i) {
    if (metrics_lines(run_dir) >= steps) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void check_stop_and_resume(int signal, int expected_status, const char* name) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string run = tmp / "run";
  Child c = start(base_args(tmp) + " --steps 100000", tmp / "log.txt");
  ASSERT_GT(c.pid, 0);
  ASSERT_TRUE(wait_for_steps(run, 3)) << read_all(c.log);
  EXPECT_FALSE(fs::exists(run + "/latest")) << "a checkpoint was written before the signal";
  ::kill(c.pid, signal);
  EXPECT_EQ(wait_exit(c.pid), expected_status) << read_all(c.log);

  // The checkpoint is of the last completed step, which is the last metrics record.
  const std::string out = read_all(c.log);
  const std::string ckpt = resolve_checkpoint(run);
  const int64_t step = std::stoll(fs::path(ckpt).filename().string().substr(5));
  EXPECT_EQ(static_cast<size_t>(step), metrics_lines(run)) << out;
  EXPECT_GE(step, 3);
  EXPECT_NE(out.find(std::string("stopped by ") + name + " after step " + std::to_string(step) + "/100000"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("saved checkpoint " + run + "/" + checkpoint_name(step)), std::string::npos) << out;
  // The printed resume command: the original command plus --resume RUN_DIR.
  const size_t at = out.find("resume with:\n  ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string resume = out.substr(at + 15, out.find('\n', at + 15) - at - 15);
  EXPECT_NE(resume.find("train --preset d2"), std::string::npos) << resume;
  EXPECT_NE(resume.find("--steps 100000"), std::string::npos) << resume;
  EXPECT_TRUE(resume.ends_with(" --resume " + run)) << resume;

  // Resuming continues from that step in the same run dir, and metrics.jsonl runs on.
  auto r = run_mptrain(base_args(tmp) + " --steps " + std::to_string(step + 2) + " --resume " + run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from " + run + "/" + checkpoint_name(step)), std::string::npos)
      << r.output;
  const auto losses = read_losses(run);
  ASSERT_EQ(losses.size(), static_cast<size_t>(step + 2));
  for (size_t i = 0; i < losses.size(); ++i) EXPECT_EQ(losses[i].first, static_cast<int64_t>(i + 1));
  EXPECT_EQ(fs::path(resolve_checkpoint(run)).filename().string(), checkpoint_name(step + 2));
}

TEST(Interrupt, SigintCheckpointsExits130AndResumeContinues) { check_stop_and_resume(SIGINT, 130, "SIGINT"); }

TEST(Interrupt, SigtermCheckpointsExits143AndResumeContinues) {
  check_stop_and_resume(SIGTERM, 143, "SIGTERM");
}

TEST(Interrupt, SecondSigintQuitsAtOnce) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  // A model big enough that a step outlasts the gap between the two signals.
  Child c = start("train --preset d8 --train-data '" + (tmp / "train_*.bin") +
                      "' --batch 4 --seq 256 --threads 2 --steps 100000 --run-dir " + (tmp / "run"),
                  tmp / "log.txt");
  ASSERT_TRUE(wait_for_steps(tmp / "run", 1)) << read_all(c.log);
  ::kill(c.pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(c.pid, SIGINT);
  EXPECT_EQ(wait_exit(c.pid), 130) << read_all(c.log);
  EXPECT_NE(read_all(c.log).find("second signal: quitting now"), std::string::npos) << read_all(c.log);
}

}  // namespace
}  // namespace mptrain
