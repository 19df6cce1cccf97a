// GELU on the GPU, tanh form (GPT-2's gelu_new), the contract of backend/ops/activations.h for every
// storage type T (float, Bf16, Fp16): math in fp32, one rounding to T on store.
// All pointers are device pointers; launches are asynchronous on ctx's stream.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// out[i] = gelu(inp[i])  (=; out may alias inp).
template <class T>
void gelu_forward(T* out, const T* inp, size_t N, Context& ctx);

// dinp[i] = gelu'(inp[i]) * dout[i]  (=; dinp may alias dout).
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t N, Context& ctx);

}  // namespace mptrain::cuda
