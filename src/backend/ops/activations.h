// The activations (cpu/activations.cpp), elementwise over n values: math in fp32, each input
// widened from its dtype and each output rounded once to its own (none for fp32). dinp may
// alias dout.
//   GELU, tanh approximation (GPT-2's "gelu_new"):
//     gelu(x) = 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x^3)))
//   exact GELU, the form BERT uses in Hugging Face (activation "gelu"):
//     gelu_erf(x) = 0.5·x·(1 + erf(x/sqrt(2)))
//   tanh (BERT's pooler); its backward reads the forward's OUTPUT.
#pragma once
#include <cstddef>

#include "core/dtype.h"

namespace mptrain::cpu {

// out (dtype to) = gelu(inp (dtype ti));  dinp (dtype td) = gelu'(inp (dtype ti)) * dout (fp32)
void gelu_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N);
void gelu_backward_typed(void* dinp, StorageType td, const void* inp, StorageType ti, const float* dout,
                         size_t N);

enum class GeluForm { Tanh, Erf };

// The fc layer's epilogue in one pass over acc[N,OC] (fp32 GEMM result; pre may be acc):
//   pre[N,OC] (dtype tp) = round(acc + bias)       (bias may be null)
//   out[N,OC] (dtype to) = round(gelu(pre))        (gelu or gelu_erf, by form)
// the same as bias_forward_typed(pre, ...) followed by gelu_forward_typed(out, to, pre, tp) (or
// gelu_erf_forward_typed): bit for bit for Tanh; for Erf within libmvec's vector erfcf against
// libm's scalar one, which the two passes apply to different elements of a loop's tail.
void bias_gelu_forward_typed(void* pre, StorageType tp, void* out, StorageType to, const float* acc,
                             const float* bias, int N, int OC, GeluForm form);

// out[N,OC] (dtype to) = round(gelu(x[N,OC] (dtype tx))) by form, row by row in the chunks of
// bias_gelu_forward_typed: the bits its `out` has for its `pre` as x (--recompute's refill).
void gelu_rows_typed(void* out, StorageType to, const void* x, StorageType tx, int N, int OC, GeluForm form);

// out (dtype to) = gelu_erf(inp (dtype ti));  dinp (dtype td) = gelu_erf'(inp (dtype ti)) * dout (fp32)
void gelu_erf_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N);
void gelu_erf_backward_typed(void* dinp, StorageType td, const void* inp, StorageType ti, const float* dout,
                             size_t N);

// out (dtype to) = tanh(inp (dtype ti)) (out may alias inp when to == ti);
// dinp (dtype td) = (1 - out^2) * dout, out in dtype to, dout fp32
void tanh_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N);
void tanh_backward_typed(void* dinp, StorageType td, const void* out, StorageType to, const float* dout,
                         size_t N);

// SwiGLU (Llama's MLP), fp32, over N rows of I: gate_up [N, 2I] holds (g | u) per row;
//   out[N, I] (=) = silu(g)·u,  silu(g) = g·sigmoid(g)
//   dgate_up[N, 2I] (=) = (dout·u·silu'(g) | dout·silu(g)),  silu'(g) = s·(1 + g·(1 − s)), s = sigmoid(g)
void swiglu_forward(float* out, const float* gate_up, int N, int I);
void swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int N, int I);

// ReLU² (modded-nanogpt's MLP), fp32, n elements: out (=) = relu(x)²; dx (=) = dout·2·relu(x)
// (dx may be dout).
void relu2_forward(float* out, const float* x, size_t n);
void relu2_backward(float* dx, const float* dout, const float* x, size_t n);

}  // namespace mptrain::cpu
