// Bad input gives one clear error line and a non-zero exit, never a crash:
// wrong shard magic, truncated shard, token id >= vocab, sequence longer than the
// context, unknown preset, unknown flag, accumulation that does not divide, a count of 0 or a
// negative one where the option needs at least 1 or 0.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::expect_clear_error;
using testing::run_mptrain;
using testing::TempDir;


std::string train(const std::string& data, const std::string& extra = "", const std::string& preset = "d2") {
  return "train --preset " + preset + " --train-data '" + data + "' --batch 2 --seq 16 --steps 2 --threads 1 --run-dir /tmp/mptrain-bad-input-run " + extra;
}

TEST(BadInput, ShardWithWrongMagic) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  std::fstream f(tmp / "train_000000.bin", std::ios::in | std::ios::out | std::ios::binary);
  const int32_t bad = 12345;
  f.write(reinterpret_cast<const char*>(&bad), 4);
  f.close();
  expect_clear_error(run_mptrain(train(tmp / "train_*.bin")), "bad magic");
}

TEST(BadInput, TruncatedShard) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  std::filesystem::resize_file(tmp / "train_000000.bin", 1024 + 2 * 100 + 1);
  expect_clear_error(run_mptrain(train(tmp / "train_*.bin")), "truncated");
}

TEST(BadInput, TokenIdOutOfRange) {
  TempDir tmp;
  std::vector<uint16_t> tokens = testing::text_like_tokens(1000);
  tokens[10] = 60000;  // >= 50257
  write_shard(tmp / "train_000000.bin", tokens);
  expect_clear_error(run_mptrain(train(tmp / "train_*.bin")), "token id 60000");
}

TEST(BadInput, SequenceLongerThanContext) {
  TempDir tmp;
  testing::write_small_shards(tmp.path(), 50000);
  expect_clear_error(run_mptrain("train --preset d2 --train-data '" + (tmp / "train_*.bin") + "' --seq 2048 --steps 1"),
                     "longer than the model's context");
}

TEST(BadInput, UnknownPreset) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  expect_clear_error(run_mptrain(train(tmp / "train_*.bin", "", "gpt5")), "unknown GPT-2 preset 'gpt5'");
}

TEST(BadInput, ShuffleIsForTokenStreams) {  // BERT's loader shuffles its instances already
  expect_clear_error(run_mptrain("train --model bert --train-data x.bert --shuffle"),
                     "--shuffle orders GPT-2's and Llama's token streams");
}

TEST(BadInput, UnknownFlag) {
  expect_clear_error(run_mptrain("train --train-data x --no-such-flag"), "--no-such-flag");
}

// The rule in words (cli/validators.h), not CLI11's "Value 0 not in range 0.000000 to 1.79e308".
TEST(BadInput, OptionsBelowTheirMinimumSayTheRule) {
  const struct {
    std::string args, want;
  } cases[] = {
      {"train --train-data x --batch 0", "--batch: must be at least 1, not 0"},
      {"train --train-data x --seq 0", "--seq: must be at least 1, not 0"},
      {"train --train-data x --steps 0", "--steps: must be at least 1, not 0"},
      {"train --train-data x --threads -1", "--threads: must be at least 0, not -1"},
      {"train --train-data x --grad-clip -0.5", "--grad-clip: must be at least 0, not -0.5"},
      {"bench --steps 0", "--steps: must be at least 1, not 0"},
      {"eval --batch 0", "--batch: must be at least 1, not 0"},
      {"generate --num-samples 0", "--num-samples: must be at least 1, not 0"},
      {"prepare --val-fraction 1", "--val-fraction: must be between 0 and 0.99, not 1"},
  };
  for (const auto& c : cases) {
    const auto r = run_mptrain(c.args);
    expect_clear_error(r, c.want);
    EXPECT_EQ(r.output.find("not in range"), std::string::npos) << c.args << ": " << r.output;
  }
}

TEST(BadInput, NoShardsMatch) {
  expect_clear_error(run_mptrain(train("/nonexistent/dir/*.bin")), "no token shards match");
}

TEST(BadInput, TotalBatchNotAMultiple) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  expect_clear_error(run_mptrain(train(tmp / "train_*.bin", "--total-batch 100")), "not a positive multiple");
}

TEST(BadInput, ResumeFromSomethingThatIsNotACheckpoint) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  expect_clear_error(run_mptrain(train(tmp / "train_*.bin", "--resume " + tmp.path())), tmp.path());
}

}  // namespace
}  // namespace mptrain
