// Elementwise tanh on the GPU (BERT's pooler activation): the contract of backend/ops/activations.h
// for every storage type T (fp32 math, one rounding to T). Device pointers; asynchronous.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// out[i] = tanh(inp[i])  (=; out may alias inp).
template <class T>
void tanh_forward(T* out, const T* inp, size_t N, Context& ctx);

// dinp[i] = (1 - out[i]^2) * dout[i], from forward's OUTPUT (=; dinp may alias dout).
template <class T>
void tanh_backward(T* dinp, const T* out, const T* dout, size_t N, Context& ctx);

}  // namespace mptrain::cuda
