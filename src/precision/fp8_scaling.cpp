// FP8's per-tensor scaling (precision/fp8_scaling.h).
#include "precision/fp8_scaling.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mptrain {

float fp8_scale_for(float amax, Fp8Format format, int margin, float previous) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return previous;
  // In double, then to float: the quotient's one rounding (an exact power of two when amax is
  // one), then the margin's exact power of two.
  const double scale = static_cast<double>(fp8_spec(format).max_value) / static_cast<double>(amax);
  return std::ldexp(static_cast<float>(scale), -margin);
}

Fp8TensorScaling::Fp8TensorScaling(Fp8Format format, int history, int margin)
    : format_(format), window_(static_cast<size_t>(history)), margin_(margin) {
  MPT_CHECK(history >= 1, "an FP8 amax history of " + std::to_string(history) + " steps: give 1 or more");
  MPT_CHECK(margin >= 0, "an FP8 scaling margin of " + std::to_string(margin) + ": give 0 or more");
}

bool Fp8TensorScaling::update(float amax) {
  if (!std::isfinite(amax)) return false;
  history_.push_back(amax);
  if (history_.size() > window_) history_.erase(history_.begin());
  scale_ = fp8_scale_for(*std::max_element(history_.begin(), history_.end()), format_, margin_, scale_);
  return true;
}

void Fp8TensorScaling::restore(std::vector<float> history, float scale) {
  MPT_CHECK(history.size() <= window_, "an FP8 amax history of " + std::to_string(history.size()) +
                                           " steps does not fit a window of " + std::to_string(window_));
  MPT_CHECK(std::isfinite(scale) && scale > 0.0f, "an FP8 scale must be positive and finite");
  history_ = std::move(history);
  scale_ = scale;
}

}  // namespace mptrain
