// The activations on the GPU: the contract of backend/ops/activations.h for every storage type T
// (float, Bf16, Fp16): math in fp32, one rounding to T on store. out may alias inp, dinp may
// alias dout. GPT-2's tanh-form GELU is also cuBLASLt's GELU epilogue, which is why BERT's
// linears (exact GELU) do not fuse theirs. Device pointers; asynchronous on ctx's stream.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// out[i] = gelu(inp[i]), tanh form;  dinp[i] = gelu'(inp[i]) * dout[i]
template <class T>
void gelu_forward(T* out, const T* inp, size_t N, Context& ctx);
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t N, Context& ctx);

// out[i] = 0.5·inp[i]·(1 + erf(inp[i]/sqrt(2)));  dinp[i] = gelu_erf'(inp[i]) * dout[i]
template <class T>
void gelu_erf_forward(T* out, const T* inp, size_t N, Context& ctx);
template <class T>
void gelu_erf_backward(T* dinp, const T* inp, const T* dout, size_t N, Context& ctx);

// out[i] = tanh(inp[i]);  dinp[i] = (1 - out[i]^2) * dout[i], from forward's OUTPUT
template <class T>
void tanh_forward(T* out, const T* inp, size_t N, Context& ctx);
template <class T>
void tanh_backward(T* dinp, const T* out, const T* dout, size_t N, Context& ctx);

// SwiGLU over N rows of I, gate_up [N, 2I] = (g | u) per row: out[N, I] (=) = silu(g)·u;
// dgate_up (=) = (dout·u·silu'(g) | dout·silu(g)), not aliasing gate_up.
template <class T>
void swiglu_forward(T* out, const T* gate_up, int N, int I, Context& ctx);
template <class T>
void swiglu_backward(T* dgate_up, const T* dout, const T* gate_up, int N, int I, Context& ctx);

// ReLU² (modded-nanogpt's MLP): out[i] (=) = relu(x[i])²;  dx[i] (=) = dout[i]·2·relu(x[i]) (dx may
// be dout).
template <class T>
void relu2_forward(T* out, const T* x, size_t n, Context& ctx);
template <class T>
void relu2_backward(T* dx, const T* x, const T* dout, size_t n, Context& ctx);

}  // namespace mptrain::cuda
