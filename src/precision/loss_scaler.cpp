// GradScaler semantics on the CPU backend.
#include "precision/loss_scaler.h"

#include <cmath>

namespace mptrain {

bool LossScaler::unscale_and_check(float* grads, size_t n) const {
  const float inv = static_cast<float>(1.0 / static_cast<double>(scale_));
  int found = 0;
#pragma omp parallel for reduction(| : found) schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i];
    found |= !std::isfinite(g);
    grads[i] = g * inv;
  }
  return found != 0;
}

void LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= config_.backoff_factor;
    growth_tracker_ = 0;
    ++skipped_;
    return;
  }
  if (++growth_tracker_ == config_.growth_interval) {
    const float grown = scale_ * config_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;  // GradScaler grows only to a finite value
    growth_tracker_ = 0;
  }
}

}  // namespace mptrain
