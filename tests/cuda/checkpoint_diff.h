// How far apart two runs' weights are at one checkpoint: the device training tests compare a
// ZeRO-1 NCCL run's saved parameters with another run's, which catches parameters downloaded
// from fp32 masters that a 16-bit all-gather left stale (device_data_parallel.h) where the
// losses alone would not (the forward reads the 16-bit copy, not the masters).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "io/checkpoint_dir.h"
#include "io/safetensors.h"

namespace mptrain::testing {

// ‖a − b‖ / ‖b‖ over every fp32 tensor of model.safetensors in run_a's and run_b's checkpoints
// at `step` (b the reference); infinity when there is nothing to compare. Both files must hold
// the same tensors with the same shapes (read_f32 throws on a shape mismatch).
inline double checkpoint_params_error(const std::string& run_a, const std::string& run_b, int64_t step) {
  const auto file = [step](const std::string& run) {
    return run + "/" + checkpoint_name(step) + "/" + kCheckpointModelFile;
  };
  const SafetensorsFile a(file(run_a)), b(file(run_b));
  EXPECT_EQ(a.names(), b.names()) << file(run_a) << " vs " << file(run_b);
  double num = 0.0, den = 0.0;
  bool compared = false;
  for (const std::string& name : b.names()) {
    const TensorView& tb = b.get(name);
    if (tb.dtype != DType::F32 || !a.contains(name)) continue;
    std::vector<float> va(tb.numel()), vb(tb.numel());
    a.read_f32(name, tb.shape, va.data());
    b.read_f32(name, tb.shape, vb.data());
    for (size_t i = 0; i < vb.size(); ++i) {
      const double d = static_cast<double>(va[i]) - vb[i];
      num += d * d;
      den += static_cast<double>(vb[i]) * vb[i];
    }
    compared = true;
  }
  if (!compared) return std::numeric_limits<double>::infinity();
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace mptrain::testing
