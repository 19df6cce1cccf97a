// Dynamic loss scaling for fp16 training, with PyTorch GradScaler's semantics
// (torch/amp/grad_scaler.py): the loss is multiplied by `scale` before backward; the
// fp32 master gradients are unscaled (multiplied by 1/scale, computed in double then
// used as float) and checked for inf/NaN before clipping; a step with a non-finite
// gradient is skipped entirely and the scale halves; after `growth_interval`
// consecutive clean steps the scale doubles.
//
// Order per optimizer step (also under gradient accumulation, where every micro-step's
// loss is scaled the same way): scale(loss).backward ×N → unscale_and_check → clip →
// step unless found_inf → update.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mptrain {

struct LossScalerConfig {
  float init_scale = 65536.0f;  // 2^16
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int growth_interval = 2000;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& config = {}) : config_(config), scale_(config.init_scale) {}

  float scale() const { return scale_; }
  // The factor that unscales the gradients: 1/scale computed in double, used as float
  // (GradScaler's inv_scale). The backend's unscale_and_check multiplies by it and reports
  // inf/NaN (train/step.cpp).
  float inv_scale() const { return static_cast<float>(1.0 / static_cast<double>(scale_)); }
  // After the step (taken or skipped): adjust the scale.
  void update(bool found_inf);

  // State for checkpoints.
  int growth_tracker() const { return growth_tracker_; }
  int64_t skipped_steps() const { return skipped_; }
  void restore(float scale, int growth_tracker, int64_t skipped) {
    scale_ = scale;
    growth_tracker_ = growth_tracker;
    skipped_ = skipped;
  }

 private:
  LossScalerConfig config_;
  float scale_;
  int growth_tracker_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace mptrain
