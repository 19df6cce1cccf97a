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
  return cuda_compiled() ? "[bench] --device cuda: no CUDA GPU on this machine"
                         : "[bench] this build has no CUDA backend (configure with -DMPTRAIN_CUDA=ON)";
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

TEST(BenchDevice, UnknownDeviceIsOneClearErrorLine) {
  expect_clear_error(run_mptrain("bench --device tpu --preset d2 --batch 1 --seq 8 --steps 1 --no-peer"), "--device");
}

}  // namespace
}  // namespace mptrain
