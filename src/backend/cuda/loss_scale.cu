// Unscale + finite check: a grid-stride loop over float4 groups and a scalar tail. The flag is
// set by a plain store of 1 (every writer stores the same value, so no atomic is needed).
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/loss_scale.h"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

__global__ void unscale_kernel(float* g, size_t n, float inv, int* found_inf) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool bad = false;
  for (size_t q = tid; q < n / 4; q += stride) {
    float4 x = reinterpret_cast<float4*>(g)[q];
    bad |= !isfinite(x.x) || !isfinite(x.y) || !isfinite(x.z) || !isfinite(x.w);
    x.x *= inv, x.y *= inv, x.z *= inv, x.w *= inv;
    reinterpret_cast<float4*>(g)[q] = x;
  }
  for (size_t i = n / 4 * 4 + tid; i < n; i += stride) {
    bad |= !isfinite(g[i]);
    g[i] *= inv;
  }
  if (bad) *found_inf = 1;
}

__global__ void scale_kernel(float* x, size_t n, float factor) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] *= factor;
}

}  // namespace

void unscale_and_check(float* grads, size_t n, float inv_scale, int* found_inf, Context& ctx) {
  MPT_PROFILE_RANGE("unscale_and_check");
  MPT_CHECK(inv_scale > 0.0f, "[unscale_and_check] inv_scale must be positive, got " + std::to_string(inv_scale));
  if (n == 0) return;
  MPT_CHECK(grads && found_inf, "[unscale_and_check] null pointer, n=" + std::to_string(n));
  MPT_CHECK(aligned16(grads), "[unscale_and_check] grads must be 16-byte aligned, n=" + std::to_string(n));
  const int threads = 256;  // a grid-stride loop; bandwidth-bound
  unscale_kernel<<<grid_for(n / 4 > 0 ? n / 4 : n, threads, ctx.info().sm_count), threads, 0, ctx.stream()>>>(
      grads, n, inv_scale, found_inf);
  MPT_CUDA_CHECK_LAUNCH("unscale_kernel");
}

void scale_in_place(float* x, size_t n, float factor, Context& ctx) {
  MPT_PROFILE_RANGE("scale_in_place");
  if (n == 0) return;
  const int threads = 256;
  scale_kernel<<<grid_for(n, threads, ctx.info().sm_count), threads, 0, ctx.stream()>>>(x, n, factor);
  MPT_CUDA_CHECK_LAUNCH("scale_kernel");
}

}  // namespace mptrain::cuda
