// Elementwise tanh. libm's tanhf: only the pooler uses it ([B, C] values per step), so
// speed does not matter and matching PyTorch's rounding does.
#include "backend/ops/tanh.h"

#include <cmath>

namespace mptrain::cpu {

void tanh_forward(float* out, const float* inp, size_t N) {
  for (size_t i = 0; i < N; ++i) out[i] = std::tanh(inp[i]);
}

void tanh_backward(float* dinp, const float* out, const float* dout, size_t N) {
  for (size_t i = 0; i < N; ++i) dinp[i] = (1.0f - out[i] * out[i]) * dout[i];
}

}  // namespace mptrain::cpu
