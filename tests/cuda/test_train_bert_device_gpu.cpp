// `mptrain train --device cuda --model bert` end to end (train/bert_device_step.h): bert-tiny
// trained for 10 steps on GPU 0 and, from the same initialisation and instances, on the CPU;
// their per-step losses in metrics.jsonl agree (relative: fp32 1e-4, bf16 3e-2, as the GPT-2
// device runs), with AdamW and with Sophia (--sophia-k 5: a curvature pass on the device at
// steps 5 and 10). Skipped without a GPU (and without Debian's fortunes, the instances' text).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::read_losses;
using testing::run_mptrain;

class TrainBertDeviceGpu : public testing::BertDataSuite {
 protected:
  static std::string args(const std::string& run, const std::string& device, const std::string& precision,
                          const std::string& extra = "") {
    return "train --model bert --preset bert-tiny --data " + data() +
           " --batch 8 --max-predictions 5 --lr 1e-3 --warmup 2 --seed 7 --threads 2 --deterministic"
           " --progress none --steps 10 --device " +
           device + " --precision " + precision + " --run-dir " + run_dir(run) + " " + extra;
  }
  // Runs the CPU and the GPU and compares their per-step losses.
  static void compare(const std::string& name, const std::string& precision, const std::string& extra,
                      double tol) {
    const auto cpu = run_mptrain(args(name + "_cpu", "cpu", precision, extra));
    ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
    const auto gpu = run_mptrain(args(name + "_gpu", "cuda", precision, extra));
    ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
    const auto lc = read_losses(run_dir(name + "_cpu")), lg = read_losses(run_dir(name + "_gpu"));
    ASSERT_EQ(lc.size(), lg.size()) << name;
    ASSERT_FALSE(lc.empty()) << name;
    for (size_t i = 0; i < lc.size(); ++i) {
      EXPECT_EQ(lc[i].first, lg[i].first) << name;
      EXPECT_TRUE(std::isfinite(lg[i].second)) << name << " step " << lg[i].first;
      EXPECT_LE(std::fabs(lg[i].second - lc[i].second), tol * std::fabs(lc[i].second))
          << name << " step " << lc[i].first << ": GPU " << lg[i].second << ", CPU " << lc[i].second;
    }
  }
};

TEST_F(TrainBertDeviceGpu, AdamWLossesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  compare("adamw_fp32", "fp32", "", 1e-4);
  compare("adamw_bf16", "bf16", "", 3e-2);
}

TEST_F(TrainBertDeviceGpu, SophiaLossesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  compare("sophia_fp32", "fp32", "--optimizer sophia --sophia-k 5", 1e-4);
}

}  // namespace
}  // namespace mptrain
