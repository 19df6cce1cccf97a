// `mptrain bench --device cuda` where it cannot run: in a build without the CUDA backend, and on
// a machine without a GPU, it is one clear error line and a non-zero exit, before any work.
// (Where a GPU exists these tests skip: bench --device cuda runs there.)
#include <gtest/gtest.h>

#include <string>

#include "backend/device.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::expect_clear_error;
using testing::run_mptrain;

// What the error names: the missing backend, or the missing GPU.
std::string expected_reason() {
  return cuda_compiled() ? "[bench] --device cuda: no CUDA device is visible"
                         : "[bench] --device cuda: this build has no CUDA backend (configure with -DMPTRAIN_CUDA=ON)";
}

TEST(BenchDevice, CudaWithoutAGpuIsOneClearErrorLine) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU: bench --device cuda runs here";
  expect_clear_error(run_mptrain("bench --device cuda --preset d2 --batch 1 --seq 8 --steps 1 --no-peer"),
                     expected_reason());
  expect_clear_error(run_mptrain("bench --device cuda --ladder --preset d2 --batch 1 --seq 8 --steps 1 --no-peer"),
                     expected_reason());
  // BERT's refuses the same way (the same bench, on the same backend).
  expect_clear_error(run_mptrain("bench --device cuda --model bert --preset bert-tiny --batch 1 --seq 16 --steps 1 "
                                 "--no-peer"),
                     expected_reason());
}

// --graphs times replays of the captured pass (on the CPU its recorded calls): it runs, and it
// refuses a warmup too short to have captured, and BERT.
TEST(BenchDevice, GraphsTimeReplaysAndRefuseWhatCannotBeReplayed) {
  const auto r = run_mptrain("bench --preset d2 --batch 1 --seq 16 --steps 2 --warmup 2 --graphs --no-peer");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ms/step"), std::string::npos) << r.output;
  expect_clear_error(
      run_mptrain("bench --preset d2 --batch 1 --seq 16 --steps 1 --warmup 1 --graphs --no-peer"),
      "--graphs needs --warmup 2");
  expect_clear_error(
      run_mptrain("bench --model bert --preset bert-tiny --batch 1 --seq 16 --steps 1 --warmup 2 "
                  "--graphs --no-peer"),
      "BERT's pass cannot be captured yet");
}

TEST(BenchDevice, UnknownDeviceIsOneClearErrorLine) {
  expect_clear_error(run_mptrain("bench --device tpu --preset d2 --batch 1 --seq 8 --steps 1 --no-peer"), "--device");
}

}  // namespace
}  // namespace mptrain
