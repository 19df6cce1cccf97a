// Checkpoint directories: naming, commit/resolve/'latest', leftovers of interrupted runs,
// pruning, and the property the protocol exists for: a child process SIGKILLed at various
// instants while writing a large checkpoint never damages the previous one.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/checkpoint_dir.h"
#include "io/fileutil.h"
#include "io/safetensors.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;

class CheckpointDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "mptrain_ckpt_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    run_ = (root_ / "run").string();
  }
  void TearDown() override { fs::remove_all(root_); }

  // A checkpoint whose model.safetensors holds one F32 tensor filled with `step`.
  void save(int64_t step, size_t numel = 16) {
    std::string dir = begin_checkpoint(run_, step);
    EXPECT_TRUE(fs::is_directory(dir));
    std::vector<float> v(numel, static_cast<float>(step));
    SafetensorsWriter w;
    w.add("w", DType::F32, {static_cast<int64_t>(numel)}, v.data());
    w.set_metadata("step", std::to_string(step));
    w.write(dir + "/model.safetensors");
    write_file_atomic(dir + "/state.json", "{\"step\": " + std::to_string(step) + "}");
    commit_checkpoint(run_, step);
  }
  std::string ckpt(int64_t step) const { return run_ + "/" + checkpoint_name(step); }
  std::string latest() const { return read_file(run_ + "/latest"); }
  static int64_t step_of(const std::string& dir) {
    SafetensorsFile f(dir + "/model.safetensors");
    return std::stoll(f.metadata().at("step"));
  }
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(run_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path root_;
  std::string run_;
};

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    return;
  }
  ADD_FAILURE() << "no mptrain::Error thrown";
}

TEST(CheckpointName, ZeroPaddedToEightDigits) {
  EXPECT_EQ(checkpoint_name(0), "step_00000000");
  EXPECT_EQ(checkpoint_name(100), "step_00000100");
  EXPECT_EQ(checkpoint_name(123456789), "step_123456789");
  expect_error([] { checkpoint_name(-1); }, {"-1"});
}

TEST_F(CheckpointDirTest, CommitResolveAndLatest) {
  save(100);
  EXPECT_EQ(latest(), "step_00000100\n");
  EXPECT_EQ(resolve_checkpoint(run_), ckpt(100));
  EXPECT_EQ(resolve_checkpoint(ckpt(100)), ckpt(100));  // a checkpoint dir resolves to itself
  save(200);
  EXPECT_EQ(latest(), "step_00000200\n");
  EXPECT_EQ(resolve_checkpoint(run_), ckpt(200));
  EXPECT_EQ(step_of(resolve_checkpoint(run_)), 200);
  EXPECT_EQ(resolve_checkpoint(ckpt(100)), ckpt(100));
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "step_00000100", "step_00000200"}));
  // 'latest' follows the last commit, even to a lower step (a run restarted from earlier).
  save(150);
  EXPECT_EQ(resolve_checkpoint(run_), ckpt(150));
}

TEST_F(CheckpointDirTest, RecommittingAStepReplacesIt) {
  save(100, 4);
  save(100, 8);
  SafetensorsFile f(ckpt(100) + "/model.safetensors");
  EXPECT_EQ(f.get("w").shape, std::vector<int64_t>{8});
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "step_00000100"}));
}

TEST_F(CheckpointDirTest, BeginRemovesAStalePartial) {
  std::string dir = begin_checkpoint(run_, 7);
  EXPECT_EQ(dir, run_ + "/.step_00000007.partial");
  write_file_atomic(dir + "/junk", "old");
  dir = begin_checkpoint(run_, 7);
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_FALSE(fs::exists(dir + "/junk"));
}

TEST_F(CheckpointDirTest, CommitWithoutBeginFails) {
  fs::create_directories(run_);
  expect_error([&] { commit_checkpoint(run_, 5); }, {".step_00000005.partial", "begin_checkpoint"});
}

TEST_F(CheckpointDirTest, PartialLeftByAKillIsIgnoredAndPruned) {
  save(100);
  // Simulate a kill mid-write: a complete-looking partial dir, never committed.
  std::string partial = begin_checkpoint(run_, 200);
  std::vector<float> v(4, 1.f);
  SafetensorsWriter w;
  w.add("w", DType::F32, {4}, v.data());
  w.set_metadata("step", "200");
  w.write(partial + "/model.safetensors");
  write_file_atomic(run_ + "/latest.tmp.12345", "step_00000200\n");
  EXPECT_EQ(resolve_checkpoint(run_), ckpt(100));
  prune_checkpoints(run_, 3);
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "step_00000100"}));
  EXPECT_EQ(step_of(resolve_checkpoint(run_)), 100);
}

TEST_F(CheckpointDirTest, PruneKeepsNewestAndNeverLatest) {
  for (int64_t s : {100, 200, 300, 400, 500, 600}) save(s);
  prune_checkpoints(run_, 2);
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "step_00000500", "step_00000600"}));
  EXPECT_EQ(resolve_checkpoint(run_), ckpt(600));

  // 'latest' naming an older checkpoint survives any keep count.
  save(50);
  prune_checkpoints(run_, 1);
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "step_00000050", "step_00000600"}));
  prune_checkpoints(run_, 0);
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "step_00000050"}));
  EXPECT_EQ(resolve_checkpoint(run_), ckpt(50));

  // Unrelated files are left alone; bad arguments are refused.
  write_file_atomic(run_ + "/notes.txt", "mine");
  fs::create_directories(run_ + "/step_00000001");  // no model.safetensors: not ours to delete
  prune_checkpoints(run_, 0);
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "notes.txt", "step_00000001", "step_00000050"}));
  expect_error([&] { prune_checkpoints(run_, -1); }, {"keep_last"});
  expect_error([&] { prune_checkpoints(run_ + "/nope", 1); }, {"nope"});
}

TEST_F(CheckpointDirTest, PruneRemovesLeftoversOfInterruptedDeletesAndReplacements) {
  save(100);
  fs::create_directories(run_ + "/.trash.step_00000050.999/sub");
  fs::create_directories(run_ + "/.step_00000100.old");
  write_file_atomic(run_ + "/.step_00000100.old/model.safetensors", "x");
  prune_checkpoints(run_, 5);
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "step_00000100"}));
}

TEST_F(CheckpointDirTest, ResolveFallsBackWhenLatestIsMissingOrDangling) {
  save(100);
  save(200);
  // Killed between the rename and the pointer update of the first commit: no 'latest'.
  fs::remove(run_ + "/latest");
  EXPECT_EQ(resolve_checkpoint(run_), ckpt(200));
  // 'latest' names a checkpoint that is gone (moved aside during a replacement).
  write_file_atomic(run_ + "/latest", "step_00000300\n");
  EXPECT_EQ(resolve_checkpoint(run_), ckpt(200));
  // Garbage in 'latest' never escapes the run dir.
  write_file_atomic(run_ + "/latest", "../../etc\n");
  EXPECT_EQ(resolve_checkpoint(run_), ckpt(200));
}

TEST_F(CheckpointDirTest, ResolveErrorsSayWhatWasExpected) {
  expect_error([&] { resolve_checkpoint(run_); }, {run_, "does not exist"});
  fs::create_directories(run_);
  expect_error([&] { resolve_checkpoint(run_); }, {run_, "model.safetensors", "latest"});
  write_file_atomic(run_ + "/latest", "step_00000100\n");
  expect_error([&] { resolve_checkpoint(run_); }, {"step_00000100", "not a complete checkpoint"});
  begin_checkpoint(run_, 100);  // only a partial: still nothing to resume
  expect_error([&] { resolve_checkpoint(run_); }, {"step_00000100"});
  write_file_atomic(run_ + "/file", "x");
  expect_error([&] { resolve_checkpoint(run_ + "/file"); }, {"not a directory", "model.safetensors"});
}

// Forks a child that writes a large checkpoint and SIGKILLs it part-way. A first, unkilled
// run measures how long the whole save takes; the kills then land at fractions of that time,
// from "just started" to "almost done". Whatever instant a kill hits, the run must resolve to
// a complete checkpoint, and the previous one must be byte-for-byte intact.
TEST_F(CheckpointDirTest, SigkillDuringWriteLeavesPreviousCheckpointIntact) {
  using clock = std::chrono::steady_clock;
  const size_t big_numel = size_t{16} << 20;                                                 // 64 MB of F32
  const double fractions[] = {-1.0, 0.0, 0.05, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.98, 0.995};  // -1: no kill
  double full_us = 0;
  int killed_before_commit = 0;
  for (double fraction : fractions) {
    const auto delay = static_cast<useconds_t>(std::max(0.0, fraction * full_us));
    SCOPED_TRACE("kill after " + std::to_string(delay) + " us");
    fs::remove_all(run_);
    save(100);
    const std::string model_before = read_file(ckpt(100) + "/model.safetensors");
    const std::string state_before = read_file(ckpt(100) + "/state.json");

    int pipefd[2];
    ASSERT_EQ(::pipe(pipefd), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // child: never returns into gtest
      ::close(pipefd[0]);
      try {
        std::vector<float> big(big_numel);
        for (size_t i = 0; i < big_numel; ++i) big[i] = static_cast<float>(i % 1000);
        std::string dir = begin_checkpoint(run_, 200);
        char go = 'g';
        if (::write(pipefd[1], &go, 1) != 1) ::_exit(3);
        SafetensorsWriter w;
        w.add("w", DType::F32, {static_cast<int64_t>(big_numel)}, big.data());
        w.set_metadata("step", "200");
        w.write(dir + "/model.safetensors");
        write_file_atomic(dir + "/state.json", "{\"step\": 200}");
        commit_checkpoint(run_, 200);
        prune_checkpoints(run_, 1);
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    ::close(pipefd[1]);
    char go = 0;
    ASSERT_EQ(::read(pipefd[0], &go, 1), 1) << "child failed before writing";
    ::close(pipefd[0]);
    const auto start = clock::now();
    if (fraction >= 0) {
      if (delay) ::usleep(delay);
      ::kill(pid, SIGKILL);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    if (fraction < 0) {
      full_us = std::chrono::duration<double, std::micro>(clock::now() - start).count();
      ASSERT_TRUE(WIFEXITED(status));
    }
    if (WIFEXITED(status)) {
      ASSERT_EQ(WEXITSTATUS(status), 0) << "child failed";
    }

    const std::string resolved = resolve_checkpoint(run_);
    SafetensorsFile f(resolved + "/model.safetensors");  // validates the whole header
    if (resolved == ckpt(100)) {
      ++killed_before_commit;
      EXPECT_EQ(read_file(ckpt(100) + "/model.safetensors"), model_before);
      EXPECT_EQ(read_file(ckpt(100) + "/state.json"), state_before);
    } else {
      ASSERT_EQ(resolved, ckpt(200));
      const TensorView& t = f.get("w");
      ASSERT_EQ(t.numel(), big_numel);
      float last = 0;
      std::memcpy(&last, t.data + t.nbytes - 4, 4);
      EXPECT_EQ(last, static_cast<float>((big_numel - 1) % 1000));
      EXPECT_EQ(read_file(resolved + "/state.json"), "{\"step\": 200}");
    }
    if (fs::exists(ckpt(100))) {
      EXPECT_EQ(read_file(ckpt(100) + "/model.safetensors"), model_before);
    }

    // The next run cleans up whatever the kill left and carries on.
    prune_checkpoints(run_, 5);
    for (const std::string& name : listing())
      EXPECT_TRUE(name == "latest" || name.rfind("step_", 0) == 0) << "leftover " << name;
    EXPECT_EQ(resolve_checkpoint(run_), resolved);
  }
  EXPECT_GT(killed_before_commit, 0) << "no kill landed before the commit; the test proved nothing";
}

}  // namespace
}  // namespace mptrain
