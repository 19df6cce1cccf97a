// GradScaler's scale schedule (the unscale itself is the backend's unscale_and_check).
#include "precision/loss_scaler.h"

#include <cmath>

namespace mptrain {

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
