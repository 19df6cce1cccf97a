// Gradient accumulation on the GPU for every storage type T (fp32 math, one rounding to the
// destination's type; the residual add itself is fused into the linears' epilogues and the
// LayerNorm), and the column sums of a linear's bias gradient. Device pointers; asynchronous.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// dst[i] += src[i]  (the backward of a residual connection, and every "+=" of a gradient).
template <class T>
void accumulate(T* dst, const T* src, size_t N, Context& ctx);
// dst[i] += src[i] widened to fp32, in one pass: a micro-batch's 16-bit weight gradients into the
// fp32 master gradients.
template <class T>
void accumulate_widening(float* dst, const T* src, size_t N, Context& ctx);

// db[m] (+=) Σ_n g[n, m] for g [N, M] row-major in T: the column sums a linear's bias gradient
// is, in fp32, each rounded once into db's type D (float, or T: a GPU plan's 16-bit gradients).
// Deterministic: fixed chunks of rows summed in order into `scratch` (bias_grad_scratch_bytes),
// then the chunks in order — no atomics. Replaces a GEMM against a vector of ones (a [1,N]·[N,M]
// product that runs at a GEMM's worst shape and needs the ones in memory).
size_t bias_grad_scratch_bytes(int N, int M);
template <class T, class D>
void bias_grad(D* db, const T* g, int N, int M, void* scratch, Context& ctx);

}  // namespace mptrain::cuda
