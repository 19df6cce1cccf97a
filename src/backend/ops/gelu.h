// GELU, tanh approximation (GPT-2's "gelu_new"):
//   gelu(x) = 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x^3)))
#pragma once
#include <cstddef>

#include "core/dtype.h"

namespace mptrain::cpu {

void gelu_forward(float* out, const float* inp, size_t N);

// dinp[i] = gelu'(inp[i]) * dout[i]   (overwritten, =; dinp may alias dout).
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N);

// Typed variants (math in fp32, one rounding on output):
//   out (dtype to) = gelu(inp (dtype ti))
//   dinp (dtype td) = gelu'(inp (dtype ti)) * dout (fp32)
void gelu_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N);
void gelu_backward_typed(void* dinp, StorageType td, const void* inp, StorageType ti, const float* dout, size_t N);

// The fc layer's epilogue in one pass over acc[N,OC] (fp32 GEMM result):
//   pre[N,OC] (dtype tp) = round(acc + bias)       (bias may be null)
//   out[N,OC] (dtype to) = round(gelu(pre))
// bit-identical to bias_forward_typed(pre, ...) followed by gelu_forward_typed(out, to, pre, tp).
void bias_gelu_forward_typed(void* pre, StorageType tp, void* out, StorageType to, const float* acc,
                             const float* bias, int N, int OC);

}  // namespace mptrain::cpu
