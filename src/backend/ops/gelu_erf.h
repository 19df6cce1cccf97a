// Exact GELU, the form BERT uses in Hugging Face (activation "gelu"; GPT-2's tanh
// approximation is gelu.h):
//   gelu_erf(x) = 0.5·x·(1 + erf(x/sqrt(2)))
#pragma once
#include <cstddef>

#include "core/dtype.h"

namespace mptrain::cpu {

void gelu_erf_forward(float* out, const float* inp, size_t N);

// dinp[i] = gelu_erf'(inp[i]) * dout[i]   (overwritten, =; dinp may alias dout).
void gelu_erf_backward(float* dinp, const float* inp, const float* dout, size_t N);

// Typed variants (math in fp32, one rounding on output; fp32 in and out give exactly the fp32
// functions' values):
//   out (dtype to) = gelu_erf(inp (dtype ti))
//   dinp (dtype td) = gelu_erf'(inp (dtype ti)) * dout (fp32)
void gelu_erf_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N);
void gelu_erf_backward_typed(void* dinp, StorageType td, const void* inp, StorageType ti, const float* dout,
                             size_t N);

}  // namespace mptrain::cpu
