// Checkpoint integrity at the library level:
//  - file_checksum streams XXH3-64 (same value as the one-shot hash, across block boundaries)
//  - a manifest verifies; one changed byte, a missing file or a damaged manifest is an error
//    naming the file and the checkpoint
//  - commit_checkpoint writes the manifest, resolve_checkpoint verifies it (and points at an
//    older checkpoint when the latest is damaged); checkpoints without one load unverified
//  - prune_checkpoints never deletes the only good checkpoint
//  - a write that fails mid-save (RLIMIT_FSIZE in a child: EFBIG, as on a full disk) fails the
//    save with a clear error and leaves the previous checkpoint resolvable and verified
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "core/error.h"
#include "io/checkpoint_dir.h"
#include "io/checksum.h"
#include "io/fileutil.h"
#include "io/safetensors.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// The Error message fn throws ("" if none).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void flip_byte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << path;
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x01));
}

// A minimal checkpoint: model.safetensors with one tensor of `numel` values equal to step.
void save(const std::string& run, int64_t step, size_t numel = 64) {
  const std::string dir = begin_checkpoint(run, step);
  std::vector<float> v(numel, static_cast<float>(step));
  SafetensorsWriter w;
  w.add("w", DType::F32, {static_cast<int64_t>(numel)}, v.data());
  w.write(dir + "/" + kCheckpointModelFile);
  write_file_atomic(dir + "/state.json", "{\"step\": " + std::to_string(step) + "}\n");
  commit_checkpoint(run, step);
}

TEST(Checksum, StreamsTheSameValueAsTheOneShotHash) {
  TempDir tmp;
  // 3 MiB + 7: several read blocks and a partial last one.
  std::string bytes(3 * 1024 * 1024 + 7, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  write_file_atomic(tmp / "big", bytes);
  EXPECT_EQ(file_checksum(tmp / "big"), XXH3_64bits(bytes.data(), bytes.size()));
  write_file_atomic(tmp / "empty", std::string());
  EXPECT_EQ(file_checksum(tmp / "empty"), 0x2d06800538d394c2ull);  // XXH3-64 of no bytes (the spec's value)
  EXPECT_EQ(checksum_hex(0x2d06800538d394c2ull), "2d06800538d394c2");
  EXPECT_NE(error_of([&] { file_checksum(tmp / "nope"); }).find("cannot read"), std::string::npos);
}

TEST(Checksum, ManifestVerifiesAndNamesTheDamagedFile) {
  TempDir tmp;
  const std::string dir = tmp.path();
  write_file_atomic(dir + "/a.json", "{\"x\": 1}\n");
  write_file_atomic(dir + "/b.bin", std::string(1000, 'b'));
  EXPECT_EQ(verify_checksum_manifest(dir), ChecksumStatus::NoManifest);
  write_checksum_manifest(dir);
  const auto manifest = nlohmann::json::parse(read_file(dir + "/" + kChecksumManifestFile));
  EXPECT_EQ(manifest["algorithm"], "xxh3-64");
  EXPECT_EQ(manifest["files"].size(), 2u);
  EXPECT_EQ(manifest["files"]["b.bin"], checksum_hex(file_checksum(dir + "/b.bin")));
  EXPECT_EQ(verify_checksum_manifest(dir), ChecksumStatus::Verified);

  flip_byte(dir + "/b.bin", 500);
  EXPECT_EQ(error_of([&] { verify_checksum_manifest(dir); }), "checksum mismatch in b.bin (checkpoint " + dir + ")");
  flip_byte(dir + "/b.bin", 500);  // restored
  EXPECT_EQ(verify_checksum_manifest(dir), ChecksumStatus::Verified);

  fs::remove(dir + "/a.json");
  EXPECT_EQ(error_of([&] { verify_checksum_manifest(dir); }),
            "a.json listed in checksums.json is missing (checkpoint " + dir + ")");
  write_file_atomic(dir + "/a.json", "{\"x\": 1}\n");

  // A required file the manifest does not cover, and damaged manifests.
  write_file_atomic(dir + "/model.safetensors", std::string("x"));
  EXPECT_NE(error_of([&] { verify_checksum_manifest(dir, "model.safetensors"); }).find("does not list model.safetensors"),
            std::string::npos);
  write_file_atomic(dir + "/" + kChecksumManifestFile, "{\"algorithm\": \"xxh3-64\", \"files\": {\"../x\": \"0\"}}");
  EXPECT_NE(error_of([&] { verify_checksum_manifest(dir); }).find("bad entry '../x'"), std::string::npos);
  write_file_atomic(dir + "/" + kChecksumManifestFile, "{\"algorithm\": \"md5\", \"files\": {}}");
  EXPECT_NE(error_of([&] { verify_checksum_manifest(dir); }).find("checksums.json is not valid"), std::string::npos);
  write_file_atomic(dir + "/" + kChecksumManifestFile, "{not json");
  EXPECT_NE(error_of([&] { verify_checksum_manifest(dir); }).find("not JSON"), std::string::npos);
}

TEST(CheckpointIntegrity, CommitWritesTheManifestAndResolveVerifiesIt) {
  TempDir tmp;
  const std::string run = tmp / "run";
  save(run, 1);
  save(run, 2);
  const std::string ckpt2 = run + "/" + checkpoint_name(2);
  const auto manifest = nlohmann::json::parse(read_file(ckpt2 + "/" + kChecksumManifestFile));
  EXPECT_TRUE(manifest["files"].contains("model.safetensors"));
  EXPECT_TRUE(manifest["files"].contains("state.json"));
  EXPECT_EQ(verify_checkpoint(ckpt2), ChecksumStatus::Verified);
  EXPECT_EQ(resolve_checkpoint(run), ckpt2);

  // One byte of the tensor data (past the header) changes: resolving fails, naming the file;
  // through the run dir, the error also points at the older, intact checkpoint.
  flip_byte(ckpt2 + "/model.safetensors", fs::file_size(ckpt2 + "/model.safetensors") - 3);
  const std::string direct = error_of([&] { resolve_checkpoint(ckpt2); });
  EXPECT_EQ(direct, "checksum mismatch in model.safetensors (checkpoint " + ckpt2 + ")");
  const std::string via_run = error_of([&] { resolve_checkpoint(run); });
  EXPECT_NE(via_run.find("checksum mismatch in model.safetensors (checkpoint " + ckpt2 + ")"), std::string::npos);
  EXPECT_NE(via_run.find("an older checkpoint may be intact: " + run + "/" + checkpoint_name(1)), std::string::npos)
      << via_run;
  EXPECT_EQ(resolve_checkpoint(run + "/" + checkpoint_name(1)), run + "/" + checkpoint_name(1));
}

TEST(CheckpointIntegrity, CheckpointWithoutManifestLoadsUnverified) {
  TempDir tmp;
  const std::string run = tmp / "run";
  save(run, 3);
  const std::string ckpt = run + "/" + checkpoint_name(3);
  fs::remove(ckpt + "/" + kChecksumManifestFile);  // as written before checksums existed
  EXPECT_EQ(verify_checkpoint(ckpt), ChecksumStatus::NoManifest);
  EXPECT_EQ(resolve_checkpoint(run), ckpt);
}

TEST(CheckpointIntegrity, PruneNeverDeletesTheOnlyGoodCheckpoint) {
  TempDir tmp;
  const std::string run = tmp / "run";
  for (int64_t s = 1; s <= 4; ++s) save(run, s);
  // Steps 3 and 4 are damaged after the fact; keep_last 1 would keep only step 4 ('latest').
  flip_byte(run + "/" + checkpoint_name(3) + "/state.json", 2);
  flip_byte(run + "/" + checkpoint_name(4) + "/model.safetensors", 20);
  prune_checkpoints(run, 1);
  EXPECT_TRUE(fs::exists(run + "/" + checkpoint_name(4)));   // latest: never removed
  EXPECT_FALSE(fs::exists(run + "/" + checkpoint_name(3)));  // damaged and beyond keep_last
  EXPECT_TRUE(fs::exists(run + "/" + checkpoint_name(2)));   // the newest good one survives
  EXPECT_FALSE(fs::exists(run + "/" + checkpoint_name(1)));
  EXPECT_EQ(verify_checkpoint(run + "/" + checkpoint_name(2)), ChecksumStatus::Verified);
  // With every checkpoint intact, pruning is as before: only keep_last (and latest) stay.
  save(run, 5);
  prune_checkpoints(run, 1);
  EXPECT_TRUE(fs::exists(run + "/" + checkpoint_name(5)));
  EXPECT_FALSE(fs::exists(run + "/" + checkpoint_name(4)));
  EXPECT_FALSE(fs::exists(run + "/" + checkpoint_name(2)));
}

// In a child whose files may not grow past limit_bytes (writes then fail with EFBIG, the
// way they fail with ENOSPC on a full disk), saves checkpoint `step` with a tensor of numel
// floats; returns the child's exit code (0: saved, 3: Error thrown, its message in *message).
int save_under_file_size_limit(const std::string& run, int64_t step, size_t numel, rlim_t limit_bytes,
                               std::string* message) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);  // else the kernel kills the writer instead of failing write()
    const rlimit lim{limit_bytes, limit_bytes};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(2);
    int code = 0;
    try {
      save(run, step, numel);
    } catch (const Error& e) {
      const std::string what = e.what();
      if (::write(fds[1], what.data(), what.size()) < 0) code = 4;
      abort_checkpoint(run, step);
      code = 3;
    }
    ::_exit(code);
  }
  ::close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) message->append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(CheckpointIntegrity, WriteErrorFailsTheSaveAndKeepsThePreviousCheckpoint) {
  TempDir tmp;
  const std::string run = tmp / "run";
  save(run, 1, 1000);  // 4 KB of data
  std::string message;
  // Step 2's model file (400 KB) cannot be written under a 64 KB limit.
  EXPECT_EQ(save_under_file_size_limit(run, 2, 100000, 64 * 1024, &message), 3) << message;
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_NE(message.find("model.safetensors"), std::string::npos) << message;
  // The previous checkpoint is still the latest, whole and verified; no partial dir remains.
  EXPECT_EQ(read_file(run + "/latest"), checkpoint_name(1) + "\n");
  EXPECT_EQ(resolve_checkpoint(run), run + "/" + checkpoint_name(1));
  EXPECT_EQ(verify_checkpoint(run + "/" + checkpoint_name(1)), ChecksumStatus::Verified);
  EXPECT_FALSE(fs::exists(run + "/" + checkpoint_name(2)));
  EXPECT_FALSE(fs::exists(run + "/." + checkpoint_name(2) + ".partial"));
  // The same save with room succeeds (the limit, not the code, made it fail).
  message.clear();
  EXPECT_EQ(save_under_file_size_limit(run, 2, 100000, 8 * 1024 * 1024, &message), 0) << message;
  EXPECT_EQ(resolve_checkpoint(run), run + "/" + checkpoint_name(2));
}

}  // namespace
}  // namespace mptrain
