// `mptrain bench --profile` as a user runs it: the per-op table of a real training step, its
// GEMM rows by shape with FLOP/s against the peak, the memory-bound ops against the measured
// bandwidth, and the rows adding up to the step (what is not in an op is its own row); the
// combinations it cannot time are one clear error. On a GPU: tests/cuda/test_bench_gpu.cpp.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::expect_clear_error;
using testing::run_mptrain;

// "  <label> <calls> <ms> <pct>% ..." for the row that starts with `label`; -1 when absent.
double percent_of_step(const std::string& out, const std::string& label) {
  std::smatch m;
  const std::regex row("\\n  " + label + " +[0-9]* +[0-9.]+ +([0-9.]+)%");
  return std::regex_search(out, m, row) ? std::stod(m[1]) : -1.0;
}

TEST(BenchProfile, GptStepOpByOpAddsUpToTheStep) {
  const auto r = run_mptrain(
      "bench --preset d2 --batch 2 --seq 32 --steps 2 --warmup 1 --threads 2 --profile --progress none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("op profile: 2 steps"), std::string::npos) << r.output;
  // d2: C 64, 4C 256, vocabulary padded to 50304; B·T = 64 rows.
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex("\\n  linear 64x64x50304 +1 +[0-9.]+ +[0-9.]+% +[0-9.]+ +[0-9.]+ GFLOP/s")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\n  linear_activation_backward 64x64x256 +2 ")))
      << r.output;
  EXPECT_TRUE(
      std::regex_search(r.output, std::regex("\\n  adamw +1 +[0-9.]+ +[0-9.]+% +[0-9.]+ +[0-9.]+ GB/s")))
      << r.output;
  const double products = percent_of_step(r.output, "all products \\(GEMMs, attention\\)");
  const double others = percent_of_step(r.output, "all other ops");
  const double between = percent_of_step(r.output, "between the ops \\(host code, data, loop\\)");
  ASSERT_GE(products, 0.0) << r.output;
  ASSERT_GE(others, 0.0) << r.output;
  ASSERT_GE(between, 0.0) << r.output;
  EXPECT_NEAR(products + others + between, 100.0, 0.3) << r.output;
  // Which rows dominate is a speed property (under CI's sanitizer build, -O1 with ASan, the
  // scalar AdamW and cross-entropy outweigh the GEMMs); it belongs to benchmarks, not here.
  EXPECT_EQ(r.output.find("pytorch"), std::string::npos) << r.output;  // no peer
}

TEST(BenchProfile, RefusesWhatItCannotTime) {
  expect_clear_error(run_mptrain("bench --preset d2 --batch 1 --seq 8 --profile --ladder"),
                     "--profile times one precision");
  expect_clear_error(run_mptrain("bench --preset d2 --batch 1 --seq 8 --warmup 2 --profile --graphs"),
                     "drop --graphs");
}

}  // namespace
}  // namespace mptrain
