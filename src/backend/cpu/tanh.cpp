// Elementwise tanh. libm's tanhf: only the pooler uses it ([B, C] values per step), so
// speed does not matter and matching PyTorch's rounding does.
#include <cmath>
#include <vector>

#include "backend/cpu/lowp.h"
#include "backend/ops/activations.h"

namespace mptrain::cpu {

// [B, C] values per step: one fp32 copy, the fp32 math, one rounding.
void tanh_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N) {
  std::vector<float> x(N);
  dispatch_storage(ti, [&](auto t) { widen_span(x.data(), static_cast<const decltype(t)*>(inp), N); });
  for (float& v : x) v = std::tanh(v);
  dispatch_storage(to, [&](auto t) { narrow_span(static_cast<decltype(t)*>(out), x.data(), N); });
}

void tanh_backward_typed(void* dinp, StorageType td, const void* out, StorageType to, const float* dout, size_t N) {
  std::vector<float> y(N);
  dispatch_storage(to, [&](auto t) { widen_span(y.data(), static_cast<const decltype(t)*>(out), N); });
  for (size_t i = 0; i < N; ++i) y[i] = (1.0f - y[i] * y[i]) * dout[i];
  dispatch_storage(td, [&](auto t) { narrow_span(static_cast<decltype(t)*>(dinp), y.data(), N); });
}

}  // namespace mptrain::cpu
