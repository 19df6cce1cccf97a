// Gradient clipping with torch.nn.utils.clip_grad_norm_'s rule: coef = max_norm / (norm + 1e-6),
// applied only when coef < 1. The training step takes the norm through the backend's
// sum_squares and applies the factor as the optimizer reads each gradient (train/step.cpp).
#pragma once

namespace mptrain {

// min(1, max_norm / (norm + 1e-6)), and 1 when max_norm <= 0.
inline float clip_coefficient(double norm, float max_norm) {
  if (max_norm <= 0.0f) return 1.0f;
  const double coef = static_cast<double>(max_norm) / (norm + 1e-6);
  return coef >= 1.0 ? 1.0f : static_cast<float>(coef);
}

}  // namespace mptrain
