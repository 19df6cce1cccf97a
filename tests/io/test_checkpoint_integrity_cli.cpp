// Checkpoint integrity as a user meets it, through `mptrain`:
//  - one flipped byte in a saved checkpoint: --resume (and generate) fail with one line,
//    "checksum mismatch in model.safetensors (checkpoint <dir>)"
//  - a write error during a save (the file-size limit of `ulimit -f`, which makes write()
//    fail with EFBIG as a full disk fails with ENOSPC): one clear line, non-zero exit, the
//    previous checkpoint still 'latest', whole and verified, no partial dir left behind
//  - a checkpoint written before checksums (no checksums.json) resumes, with a warning
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/checkpoint_dir.h"
#include "io/checksum.h"
#include "io/fileutil.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::expect_clear_error;
using testing::run_command;
using testing::run_mptrain;
using testing::TempDir;

std::string train_args(const std::string& data, const std::string& run, int64_t steps) {
  return "train --preset d2 --train-data '" + data + "/train_*.bin' --batch 2 --seq 32 --steps " +
         std::to_string(steps) + " --save-every 1 --sample-tokens 1 --threads 2 --seed 5 --quiet --run-dir " + run;
}

void flip_byte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << path;
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x10));
}

TEST(CheckpointIntegrityCli, OneCorruptByteFailsTheLoadNamingTheFile) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string run = tmp / "run";
  auto a = run_mptrain(train_args(tmp.path(), run, 2));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const std::string ckpt = run + "/" + checkpoint_name(2);
  ASSERT_EQ(verify_checkpoint(ckpt), ChecksumStatus::Verified);
  const std::string model = ckpt + "/" + kCheckpointModelFile;
  flip_byte(model, fs::file_size(model) / 2);  // inside the tensor data: the file still parses

  const std::string mismatch = "checksum mismatch in model.safetensors (checkpoint " + ckpt + ")";
  expect_clear_error(run_mptrain(train_args(tmp.path(), tmp / "resumed", 3) + " --resume " + ckpt), mismatch);
  // Through the run dir, the error also names the intact previous checkpoint.
  auto via_run = run_mptrain(train_args(tmp.path(), tmp / "resumed", 3) + " --resume " + run);
  expect_clear_error(via_run, mismatch);
  EXPECT_NE(via_run.output.find("an older checkpoint may be intact: " + run + "/" + checkpoint_name(1)),
            std::string::npos)
      << via_run.output;
  expect_clear_error(run_mptrain("generate --checkpoint " + ckpt + " --max-new-tokens 2"), mismatch);
  // The state file too.
  flip_byte(run + "/" + checkpoint_name(1) + "/state.json", 3);
  expect_clear_error(run_mptrain(train_args(tmp.path(), tmp / "resumed", 3) + " --resume " + run + "/" +
                                 checkpoint_name(1)),
                     "checksum mismatch in state.json");
}

TEST(CheckpointIntegrityCli, WriteErrorDuringSaveKeepsThePreviousCheckpoint) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string run = tmp / "run";
  auto a = run_mptrain(train_args(tmp.path(), run, 1));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const std::string prev = run + "/" + checkpoint_name(1);
  const uintmax_t model_bytes = fs::file_size(prev + "/" + kCheckpointModelFile);
  // Files may grow to half the model file: every checkpoint save fails, the rest runs.
  // (ulimit -f counts 512-byte blocks; SIGXFSZ ignored so write() returns EFBIG.)
  const std::string limited = "sh -c \"trap '' XFSZ; ulimit -f " + std::to_string(model_bytes / 2 / 512) + "; exec " +
                              MPTRAIN_BINARY + " " + train_args(tmp.path(), run, 2) + " --resume " + run + "\"";
  auto r = run_command(limited);
  expect_clear_error(r, "saving checkpoint " + checkpoint_name(2) + " in '" + run +
                            "' failed (the previous checkpoint is kept)");
  EXPECT_NE(r.output.find("File too large"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(run + "/latest"), checkpoint_name(1) + "\n");
  EXPECT_EQ(resolve_checkpoint(run), prev);
  EXPECT_EQ(verify_checkpoint(prev), ChecksumStatus::Verified);
  EXPECT_FALSE(fs::exists(run + "/" + checkpoint_name(2)));
  EXPECT_FALSE(fs::exists(run + "/." + checkpoint_name(2) + ".partial"));
  // Without the limit the same resume goes through.
  auto ok = run_mptrain(train_args(tmp.path(), run, 2) + " --resume " + run);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(resolve_checkpoint(run), run + "/" + checkpoint_name(2));
}

TEST(CheckpointIntegrityCli, CheckpointWithoutChecksumsResumesWithAWarning) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string run = tmp / "run";
  ASSERT_EQ(run_mptrain(train_args(tmp.path(), run, 1)).exit_code, 0);
  const std::string ckpt = run + "/" + checkpoint_name(1);
  fs::remove(ckpt + "/" + kChecksumManifestFile);
  auto r = run_mptrain(train_args(tmp.path(), tmp / "resumed", 2) + " --resume " + ckpt);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: checkpoint " + ckpt + " has no checksums.json"), std::string::npos) << r.output;
  EXPECT_EQ(verify_checkpoint(tmp / "resumed/" + checkpoint_name(2)), ChecksumStatus::Verified);
}

}  // namespace
}  // namespace mptrain
