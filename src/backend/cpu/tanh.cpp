// Elementwise tanh. libm's tanhf: only the pooler uses it ([B, C] values per step), so
// speed does not matter and matching PyTorch's rounding does.
#include "backend/ops/tanh.h"

#include <cmath>
#include <vector>

#include "backend/cpu/lowp.h"

namespace mptrain::cpu {

void tanh_forward(float* out, const float* inp, size_t N) {
  for (size_t i = 0; i < N; ++i) out[i] = std::tanh(inp[i]);
}

void tanh_backward(float* dinp, const float* out, const float* dout, size_t N) {
  for (size_t i = 0; i < N; ++i) dinp[i] = (1.0f - out[i] * out[i]) * dout[i];
}

// [B, C] values per step: one fp32 copy, the fp32 functions, one rounding.
void tanh_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N) {
  std::vector<float> x(N);
  dispatch_storage(ti, [&](auto t) { widen_span(x.data(), static_cast<const decltype(t)*>(inp), N); });
  tanh_forward(x.data(), x.data(), N);
  dispatch_storage(to, [&](auto t) { narrow_span(static_cast<decltype(t)*>(out), x.data(), N); });
}

void tanh_backward_typed(void* dinp, StorageType td, const void* out, StorageType to, const float* dout, size_t N) {
  std::vector<float> y(N);
  dispatch_storage(to, [&](auto t) { widen_span(y.data(), static_cast<const decltype(t)*>(out), N); });
  tanh_backward(y.data(), y.data(), dout, N);
  dispatch_storage(td, [&](auto t) { narrow_span(static_cast<decltype(t)*>(dinp), y.data(), N); });
}

}  // namespace mptrain::cpu
