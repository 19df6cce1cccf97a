// Gradient accumulation on the GPU for every storage type T (fp32 math, one rounding to T; the
// residual add itself is fused into the linears' epilogues and the LayerNorm). Device pointers;
// asynchronous.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// dst[i] += src[i]  (the backward of a residual connection, and every "+=" of a gradient).
template <class T>
void accumulate(T* dst, const T* src, size_t N, Context& ctx);

}  // namespace mptrain::cuda
