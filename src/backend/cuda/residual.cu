// Gradient accumulation (the elementwise sum through elementwise.cuh's map kernel; the widening
// form in a kernel of its own) and the bias gradient's deterministic column sums.
#include <algorithm>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "backend/cuda/residual.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};

template <class T>
__global__ void accumulate_widening_kernel(float* dst, const T* src, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] += to_f32(src[i]);
}

// Rows per chunk of the bias gradient: at least 64, and at most 64 chunks (the scratch's rows).
constexpr int kMaxChunks = 64;
int rows_per_chunk(int N) { return std::max(64, (N + kMaxChunks - 1) / kMaxChunks); }
int chunks(int N) { return (N + rows_per_chunk(N) - 1) / rows_per_chunk(N); }

// partial[c, m] (=) Σ g[n, m] over the rows n of chunk c, ascending. A warp reads 32 adjacent
// columns of a row: coalesced.
template <class T>
__global__ void column_chunk_sums_kernel(float* partial, const T* g, int N, int M, int rows) {
  const size_t n_items = static_cast<size_t>((N + rows - 1) / rows) * M;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_items; i += stride) {
    const int c = static_cast<int>(i / M), m = static_cast<int>(i % M);
    const int end = min(N, (c + 1) * rows);
    float sum = 0.0f;
    for (int n = c * rows; n < end; ++n) sum += to_f32(g[static_cast<size_t>(n) * M + m]);
    partial[i] = sum;
  }
}

// db[m] (+=) Σ_c partial[c, m], c ascending, rounded once to D.
template <class D>
__global__ void column_total_kernel(D* db, const float* partial, int n_chunks, int M) {
  const int stride = static_cast<int>(gridDim.x * blockDim.x);
  for (int m = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); m < M; m += stride) {
    float sum = 0.0f;
    for (int c = 0; c < n_chunks; ++c) sum += partial[static_cast<size_t>(c) * M + m];
    db[m] = from_f32<D>(to_f32(db[m]) + sum);
  }
}
}  // namespace

template <class T>
void accumulate(T* dst, const T* src, size_t N, Context& ctx) {
  map_op<T, 2>("accumulate", dst, Inputs<T, 2>{{dst, src}}, N, Add{}, ctx);
}

template <class T>
void accumulate_widening(float* dst, const T* src, size_t N, Context& ctx) {
  MPT_PROFILE_RANGE("accumulate_widening");
  if (N == 0) return;
  MPT_CHECK(dst && src, "[accumulate_widening] null pointer, n=" + std::to_string(N));
  const int threads = 256;  // a grid-stride loop; bandwidth-bound
  accumulate_widening_kernel<T><<<grid_for(N, threads, ctx.info().sm_count), threads, 0, ctx.stream()>>>(dst, src, N);
  MPT_CUDA_CHECK_LAUNCH("accumulate_widening_kernel");
}

size_t bias_grad_scratch_bytes(int N, int M) {
  return N > 0 && M > 0 ? static_cast<size_t>(chunks(N)) * M * sizeof(float) : 0;
}

template <class T, class D>
void bias_grad(D* db, const T* g, int N, int M, void* scratch, Context& ctx) {
  MPT_PROFILE_RANGE("bias_grad");
  MPT_CHECK(N >= 0 && M > 0, "[bias_grad] bad size N=" + std::to_string(N) + " M=" + std::to_string(M));
  if (N == 0) return;
  MPT_CHECK(db && g && scratch, "[bias_grad] null pointer, N=" + std::to_string(N) + " M=" + std::to_string(M));
  auto* partial = static_cast<float*>(scratch);
  const int threads = 256, rows = rows_per_chunk(N), n_chunks = chunks(N);
  const size_t items = static_cast<size_t>(n_chunks) * M;
  column_chunk_sums_kernel<T>
      <<<grid_for(items, threads, ctx.info().sm_count), threads, 0, ctx.stream()>>>(partial, g, N, M, rows);
  MPT_CUDA_CHECK_LAUNCH("column_chunk_sums_kernel");
  column_total_kernel<D><<<grid_for(static_cast<size_t>(M), threads, ctx.info().sm_count), threads, 0,
                           ctx.stream()>>>(db, partial, n_chunks, M);
  MPT_CUDA_CHECK_LAUNCH("column_total_kernel");
}

#define MPT_INSTANTIATE(T)                                                             \
  template void accumulate<T>(T*, const T*, size_t, Context&);                         \
  template void accumulate_widening<T>(float*, const T*, size_t, Context&);            \
  template void bias_grad<T, T>(T*, const T*, int, int, void*, Context&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE)
template void bias_grad<Bf16, float>(float*, const Bf16*, int, int, void*, Context&);
template void bias_grad<Fp16, float>(float*, const Fp16*, int, int, void*, Context&);

}  // namespace mptrain::cuda
