// Elementwise tanh (BERT's pooler activation).
#pragma once
#include <cstddef>

#include "core/dtype.h"

namespace mptrain::cpu {

// out[i] = tanh(inp[i])   (out may alias inp).
void tanh_forward(float* out, const float* inp, size_t N);

// dinp[i] = (1 - out[i]^2) * dout[i], from forward's OUTPUT (overwritten, =; dinp may alias dout).
void tanh_backward(float* dinp, const float* out, const float* dout, size_t N);

// Typed variants (fp32 math, one rounding on output):
//   out (dtype to) = tanh(inp (dtype ti))                       (out may alias inp when to == ti)
//   dinp (dtype td) = (1 - out^2) * dout, out in dtype to, dout fp32
void tanh_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N);
void tanh_backward_typed(void* dinp, StorageType td, const void* out, StorageType to, const float* dout, size_t N);

}  // namespace mptrain::cpu
