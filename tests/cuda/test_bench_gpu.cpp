// `mptrain bench --device cuda`: one precision, and the GPU ladder (fp32 → TF32 → bf16 → fused
// epilogues → flash attention → padded vocabulary → CUDA graphs for GPT-2), each rung in its own process, on
// a small model: every rung runs (its backend options included), the table has a row for each and the GPU's
// memory is reported. No timing is asserted (speed lives in benchmarks, not tests). Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "common/test_util.h"
#include "cuda/gpu_test_util.h"

namespace mptrain {
namespace {

using testing::run_mptrain;

TEST(BenchGpu, OnePrecisionReportsTheGpusMemory) {
  SKIP_WITHOUT_GPU();
  const auto r = run_mptrain(
      "bench --device cuda --preset d2 --batch 2 --seq 64 --steps 2 --warmup 1 --precision bf16 "
      "--no-peer --result-line");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("GPU memory in use"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("RESULT precision=bf16"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("device_mb=0.0 "), std::string::npos) << r.output;
}

// The op profile on the GPU: each op waited for, rows per GEMM shape against the datasheet peak,
// the others against the GPU's own copy bandwidth (not the host's), adding up to the step.
TEST(BenchGpu, ProfileTimesEachOpOnTheGpu) {
  SKIP_WITHOUT_GPU();
  const auto r = run_mptrain(
      "bench --device cuda --preset d2 --batch 2 --seq 64 --steps 2 --warmup 1 --precision bf16 --profile "
      "--progress none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("op profile on the GPU"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("op profile: 2 steps"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n  adamw "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n  linear 128x64x"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("copy measured now, 0.0 GB/s"), std::string::npos) << r.output;
}

TEST(BenchGpu, LadderRunsEveryRung) {
  SKIP_WITHOUT_GPU();
  for (const char* model : {"--preset d2", "--model bert --preset bert-tiny"}) {
    SCOPED_TRACE(model);
    const auto r = run_mptrain(std::string("bench --device cuda --ladder ") + model +
                               " --batch 2 --seq 64 --steps 2 --warmup 1 --no-peer");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* row : {"| fp32 |", "| tf32 |", "| bf16 |", "| bf16 + fused epilogues |",
                            "| bf16 + flash attention |", "| bf16 + padded vocabulary |"})
      EXPECT_NE(r.output.find(row), std::string::npos) << row << " in:\n" << r.output;
    const bool gpt2 = std::string(model) == "--preset d2";
    EXPECT_EQ(r.output.find("| bf16 + CUDA graphs |") != std::string::npos, gpt2) << r.output;
    EXPECT_EQ(r.output.find("failed"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("GPU memory in use (MB)"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace mptrain
