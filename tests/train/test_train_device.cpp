// `mptrain train --device cuda` where it cannot run: on a machine (or build) without a GPU it
// stops with one clear error line and a non-zero exit (GPT-2 and BERT, Sophia, ZeRO-1 and fp16
// fault injection included: the GPU runs the same model and step code), and distributed options
// that make no sense are refused by name before any GPU is looked for, so these checks run here. The GPU runs
// themselves: tests/cuda/test_train_device_gpu.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "backend/device.h"
#include "train/train_test_util.h"

namespace mptrain::testing {
namespace {

std::string tiny_args(const TempDir& tmp) {
  const std::string train = write_small_shards(tmp.path(), 4000, 1000);
  return "train --train-data '" + train + "' --preset d2 -b 2 -t 16 --steps 2 --run-dir " + (tmp / "run") + " -q";
}

TEST(TrainDevice, NoGpuIsOneClearError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is visible: tests/cuda/test_train_device_gpu.cpp runs it";
  TempDir tmp;
  const RunResult r = run_mptrain(tiny_args(tmp) + " --device cuda");
  // A CUDA build names the missing device, a CPU-only build the missing backend.
  const std::string missing = cuda_compiled() ? "--device cuda: no CUDA device is visible"
                                              : "this build has no CUDA backend (configure with -DMPTRAIN_CUDA=ON)";
  expect_clear_error(r, missing);
  EXPECT_FALSE(std::filesystem::exists(tmp / "run/metrics.jsonl")) << "nothing may be trained";
  // Sophia, ZeRO-1, NCCL and fp16 fault injection run on the GPU too: they get as far as looking for it.
  expect_clear_error(run_mptrain(tiny_args(tmp) + " --device cuda --optimizer sophia"), missing);
  expect_clear_error(run_mptrain(tiny_args(tmp) + " --device cuda --zero 1"), missing);
  expect_clear_error(run_mptrain(tiny_args(tmp) + " --device cuda --dist-backend nccl"), missing);
  expect_clear_error(run_mptrain(tiny_args(tmp) + " --device cuda --precision fp16 --fault-inf-grad 1"),
                     missing);
  // BERT runs on the GPU too: looked for before its (here missing) instance file is read.
  expect_clear_error(run_mptrain("train --model bert --train-data " + (tmp / "none.bert") + " --device cuda -q"),
                     missing);
}

TEST(TrainDevice, UnsupportedOptionsAreRefusedByName) {
  TempDir tmp;
  const std::string args = tiny_args(tmp) + " --device cuda";
  expect_clear_error(run_mptrain(args + " --dist-backend gloo"),
                     "unknown --dist-backend 'gloo' (expected auto, mpi or nccl)");
  expect_clear_error(run_mptrain(tiny_args(tmp) + " --dist-backend nccl"), "--dist-backend nccl needs --device cuda");
  expect_clear_error(run_mptrain(args + " --overlap-grad-reduce sometimes"),
                     "unknown --overlap-grad-reduce 'sometimes' (expected auto, on or off)");
}

TEST(TrainDevice, UnknownDeviceIsRefused) {
  TempDir tmp;
  const RunResult r = run_mptrain(tiny_args(tmp) + " --device tpu");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.exit_code, 128) << r.output;
  EXPECT_NE(r.output.find("--device"), std::string::npos) << r.output;
}

TEST(TrainDevice, CpuIsTheDefaultAndRecorded) {
  TempDir tmp;
  const RunResult r = run_mptrain(tiny_args(tmp));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(tmp / "run/config.json");
  ASSERT_TRUE(in) << "no config.json";
  const nlohmann::json j = nlohmann::json::parse(in);
  const std::string dump = j.dump();
  EXPECT_NE(dump.find("\"device\":\"cpu\""), std::string::npos) << dump;
}

TEST(TrainDevice, AutoFallsBackToCpuAndSaysWhy) {
  if (cuda_compiled() && cuda_device_count() > 0) GTEST_SKIP() << "a GPU is visible: auto picks it";
  TempDir tmp;
  const std::string train = write_small_shards(tmp.path(), 4000, 1000);
  // Not -q: the log line saying which device and why is the point.
  const RunResult r = run_mptrain("train --train-data '" + train + "' --preset d2 -b 2 -t 16 --steps 2 --run-dir " +
                                  (tmp / "run") + " --device auto --progress none --sample-tokens 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string why = cuda_compiled() ? "no CUDA device is visible"
                                          : "this build has no CUDA backend (configure with -DMPTRAIN_CUDA=ON)";
  EXPECT_NE(r.output.find("device auto: cpu (" + why + ")"), std::string::npos) << r.output;
  std::ifstream in(tmp / "run/config.json");
  ASSERT_TRUE(in) << "no config.json";
  const std::string dump = nlohmann::json::parse(in).dump();
  EXPECT_NE(dump.find("\"device\":\"cpu\""), std::string::npos) << "the device used, not 'auto': " << dump;
}

}  // namespace
}  // namespace mptrain::testing
