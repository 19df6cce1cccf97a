// Exact (erf) GELU on the GPU, BERT's activation: the contract of backend/ops/activations.h for
// every storage type T (math in fp32, one rounding to T on store). GPT-2's tanh form is gelu.h
// (and cuBLASLt's GELU epilogue, which is why BERT's linears do not fuse their GELU).
// Device pointers; asynchronous on ctx's stream.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// out[i] = 0.5·inp[i]·(1 + erf(inp[i]/sqrt(2)))  (=; out may alias inp).
template <class T>
void gelu_erf_forward(T* out, const T* inp, size_t N, Context& ctx);

// dinp[i] = gelu_erf'(inp[i]) * dout[i]  (=; dinp may alias dout).
template <class T>
void gelu_erf_backward(T* dinp, const T* inp, const T* dout, size_t N, Context& ctx);

}  // namespace mptrain::cuda
