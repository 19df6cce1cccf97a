// `mptrain bench --model bert` as a user runs it (subprocesses): the precision ladder prints
// one row per precision, each from its own child process, with figures in every column;
// the synthetic batch's masked-position count (the recipe of bench/bench.h) reaches the FLOP
// count; the PyTorch peer (bench/pytorch_bert.py) runs in the same invocation when torch is
// present; bad sizes and presets are one clear error before any work.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "bench/bench.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::expect_clear_error;
using testing::run_mptrain;

// The table row of `precision`: "| fp32 | 12.3 | 456 | ..." with a number in the time column.
bool has_rung(const std::string& out, const std::string& precision) {
  const std::regex row("\\n\\| " + precision + " \\| [0-9]+\\.[0-9] \\| [0-9]+ \\| [0-9.]+ \\|");
  return std::regex_search(out, row);
}

TEST(BenchBert, MaskedPositionsFollowTheRecipe) {
  // Rows of 32 and 28 real tokens (28 = 32 - T/8): 29 and 25 content tokens, 15% rounded half
  // up = 4 and 4 (3.75); at T=128 rows 128/112/96/80 give 19, 16, 14 and 12 (11.55).
  EXPECT_EQ(bert_bench_masked_positions(2, 32), 8);
  EXPECT_EQ(bert_bench_masked_positions(4, 128), 19 + 16 + 14 + 12);
  EXPECT_EQ(bert_bench_masked_positions(8, 128), 2 * (19 + 16 + 14 + 12));
  EXPECT_EQ(bert_bench_masked_positions(1, 8), 1);  // the shortest sequence: at least one
}

TEST(BenchBert, LadderPrintsFourRungs) {
  const auto r = run_mptrain(
      "bench --model bert --preset bert-tiny --seq 32 --batch 2 --steps 1 --ladder --no-peer --threads 2 "
      "--progress none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* p : {"fp32", "tf32", "bf16", "fp16"}) EXPECT_TRUE(has_rung(r.output, p)) << p << "\n" << r.output;
  EXPECT_EQ(r.output.find("failed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("precision ladder: bert-tiny, batch 2 x 32"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the MLM head on the 8 masked positions"), std::string::npos) << r.output;
  // fp32's speed-up over itself, and no GPT-2 (issue 4) targets on a BERT table.
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\n\\| fp32 \\|[^\\n]*\\| 1\\.00x \\|"))) << r.output;
  EXPECT_EQ(r.output.find("target bf16"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("PyTorch ="), std::string::npos) << r.output;  // --no-peer
}

TEST(BenchBert, PeerRunsInTheSameInvocation) {
  if (!testing::have_torch()) GTEST_SKIP() << "no torch at /usr/bin/python3";
  const auto r = run_mptrain(
      "bench --model bert --preset bert-tiny --seq 32 --batch 2 --steps 1 --warmup 0 --precision bf16 --threads 2 "
      "--progress none --rounds 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pytorch_bert.py --preset bert-tiny --batch 2 --seq 32"), std::string::npos) << r.output;
  // Alternating rounds (ours, the peer's, ours, the peer's), medians compared, quietness said.
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\nround 1/2: mptrain [0-9.]+ ms/step, PyTorch [0-9.]+ ms/step")))
      << r.output;
  EXPECT_NE(r.output.find("\nround 2/2: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("medians of 2 alternating rounds"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\nquietness: load average [0-9.]+ before; during the [0-9]+ s "
                                                     "run others used [0-9.]+ cores")))
      << r.output;
  EXPECT_NE(r.output.find("--vocab 30522 --padded-vocab 30528"), std::string::npos) << r.output;
  // The peer did the same work: same shape, same number of masked positions.
  EXPECT_NE(r.output.find("batch 2 x 32, 8 masked, bf16"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\npytorch bf16: [0-9]+\\.[0-9] ms/step"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\nratio: mptrain is [0-9]+\\.[0-9]+x the speed of PyTorch")))
      << r.output;
}

TEST(BenchBert, BadSizesAreOneClearError) {
  expect_clear_error(run_mptrain("bench --model bert --preset bert-tiny --seq 600 --no-peer"),
                     "--seq 600 is longer than the model's 512 positions");
  expect_clear_error(run_mptrain("bench --model bert --preset bert-tiny --seq 4 --no-peer --ladder"),
                     "--seq 4 is too short for BERT's synthetic instances");
  expect_clear_error(run_mptrain("bench --model bert --preset gpt2 --no-peer"), "gpt2");
  expect_clear_error(run_mptrain("bench --model t5 --no-peer"), "--model");
}

}  // namespace
}  // namespace mptrain
