// Two-pass deterministic sum of squares: kPartials blocks, each summing a fixed set of elements (a
// grid-stride loop whose grid is a constant, not a function of the GPU), then one block
// reducing the partials with a fixed butterfly order.
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/grad_norm.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

constexpr int kPartials = 1024;  // blocks of pass 1 (several per SM on any GPU) = threads of pass 2
constexpr int kThreads = 256;

__global__ void sumsq_partial_kernel(double* partial, const float* g, size_t n) {
  __shared__ double red[32];
  double s = 0.0;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const double x = g[i];
    s += x * x;
  }
  s = block_sum(s, red);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sumsq_final_kernel(double* sum, const double* partial) {
  __shared__ double red[32];
  const double total = block_sum(partial[threadIdx.x], red);
  if (threadIdx.x == 0) *sum = total;
}

}  // namespace

size_t sum_squares_scratch_doubles() { return kPartials; }

void sum_squares(double* sum, const float* x, size_t n, double* scratch, Context& ctx) {
  MPT_PROFILE_RANGE("sum_squares");
  MPT_CHECK(sum && scratch && (x || n == 0), "[sum_squares] null pointer, n=" + std::to_string(n));
  sumsq_partial_kernel<<<kPartials, kThreads, 0, ctx.stream()>>>(scratch, x, n);
  MPT_CUDA_CHECK_LAUNCH("sumsq_partial_kernel");
  sumsq_final_kernel<<<1, kPartials, 0, ctx.stream()>>>(sum, scratch);
  MPT_CUDA_CHECK_LAUNCH("sumsq_final_kernel");
}

}  // namespace mptrain::cuda
