// Exact GELU, the form BERT uses in Hugging Face (activation "gelu"; GPT-2's tanh
// approximation is gelu.h):
//   gelu_erf(x) = 0.5·x·(1 + erf(x/sqrt(2)))
#pragma once
#include <cstddef>

namespace mptrain::cpu {

void gelu_erf_forward(float* out, const float* inp, size_t N);

// dinp[i] = gelu_erf'(inp[i]) * dout[i]   (overwritten, =; dinp may alias dout).
void gelu_erf_backward(float* dinp, const float* inp, const float* dout, size_t N);

}  // namespace mptrain::cpu
