// Residual add and gradient accumulation on the GPU: the contract of backend/ops/residual.h
// for every storage type T (fp32 math, one rounding to T). Device pointers; asynchronous.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// out[i] = a[i] + b[i]  (=; out may alias a or b).
template <class T>
void residual_forward(T* out, const T* a, const T* b, size_t N, Context& ctx);

// dst[i] += src[i]  (the backward of a residual connection, and every "+=" of a gradient).
template <class T>
void accumulate(T* dst, const T* src, size_t N, Context& ctx);

}  // namespace mptrain::cuda
