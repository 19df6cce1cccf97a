// Elementwise tanh (BERT's pooler activation).
#pragma once
#include <cstddef>

namespace mptrain::cpu {

// out[i] = tanh(inp[i])   (out may alias inp).
void tanh_forward(float* out, const float* inp, size_t N);

// dinp[i] = (1 - out[i]^2) * dout[i], from forward's OUTPUT (overwritten, =; dinp may alias dout).
void tanh_backward(float* dinp, const float* out, const float* dout, size_t N);

}  // namespace mptrain::cpu
