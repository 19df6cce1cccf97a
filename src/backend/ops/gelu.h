// GELU, tanh approximation (GPT-2's "gelu_new"):
//   gelu(x) = 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x^3)))
#pragma once
#include <cstddef>

namespace mptrain::cpu {

void gelu_forward(float* out, const float* inp, size_t N);

// dinp[i] = gelu'(inp[i]) * dout[i]   (overwritten, =; dinp may alias dout).
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N);

}  // namespace mptrain::cpu
