// Sophia-G's kernels: grid-stride loops over groups of 4 (16-byte loads) with a scalar tail,
// like adamw.cu's. The per-element arithmetic is cpu sophia_update's, in its order, with the
// factors (1 − lr·wd, 1 − β1, 1 − β2) formed on the host in double and rounded once, as the CPU
// does, so the two backends differ only where a compiler fuses a multiply-add. The unclipped
// count reduces per block (warp shuffles on integers) and adds one 64-bit integer atomic per
// block: exact, so the result does not depend on the order blocks finish in.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "backend/cuda/sophia.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

struct UpdateCoeffs {
  float decay;  // 1 − lr·wd, for elements whose mask bit is set
  float beta1, one_minus_beta1;
  float neg_lr, rho_b;
};

// cpu sophia_update's body for one element; returns the new parameter, updates m. The decay
// and β1 products are rounded on their own (__fmul_rn is never fused into the add that
// follows), as PyTorch's separate mul_ calls round them: with h = 0 the step is then exactly
// round(round(p·decay) − lr·sign(m)).
__device__ __forceinline__ float sophia_one(float p, float g, float& m, float h, bool decayed,
                                            const UpdateCoeffs& k) {
  if (decayed) p = __fmul_rn(p, k.decay);
  const float mi = __fmul_rn(m, k.beta1) + k.one_minus_beta1 * g;
  m = mi;
  const float ratio = fminf(fabsf(mi) / (k.rho_b * h + 1e-15f), 1.0f);
  const float sign = mi > 0.0f ? 1.0f : (mi < 0.0f ? -1.0f : 0.0f);
  return p + k.neg_lr * sign * ratio;
}

__device__ __forceinline__ bool mask_bit(const uint32_t* mask, size_t i) {
  return (mask[i >> 5] >> (i & 31)) & 1u;
}

__global__ void sophia_update_kernel(float* params, const float* grads, float* m, const float* h,
                                     const uint32_t* mask, size_t n, UpdateCoeffs k, float gs) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t groups = n / 4;
  for (size_t q = tid; q < groups; q += stride) {
    const size_t i = q * 4;
    float4 p = reinterpret_cast<const float4*>(params)[q];
    const float4 g = reinterpret_cast<const float4*>(grads)[q];
    float4 mm = reinterpret_cast<const float4*>(m)[q];
    const float4 hh = reinterpret_cast<const float4*>(h)[q];
    const uint32_t bits = mask[i >> 5] >> (i & 31);  // i % 4 == 0: the 4 bits share one word
    p.x = sophia_one(p.x, g.x * gs, mm.x, hh.x, bits & 1u, k);
    p.y = sophia_one(p.y, g.y * gs, mm.y, hh.y, bits & 2u, k);
    p.z = sophia_one(p.z, g.z * gs, mm.z, hh.z, bits & 4u, k);
    p.w = sophia_one(p.w, g.w * gs, mm.w, hh.w, bits & 8u, k);
    reinterpret_cast<float4*>(params)[q] = p;
    reinterpret_cast<float4*>(m)[q] = mm;
  }
  for (size_t i = groups * 4 + tid; i < n; i += stride)
    params[i] = sophia_one(params[i], grads[i] * gs, m[i], h[i], mask_bit(mask, i), k);
}

// cpu sophia_hessian_update's expression: h·β2 + ((1−β2)·ĝ)·ĝ.
__device__ __forceinline__ float hessian_one(float h, float g, float beta2, float one_minus_beta2) {
  return h * beta2 + one_minus_beta2 * g * g;
}

__global__ void sophia_hessian_kernel(float* h, const float* ghat, size_t n, float beta2,
                                      float one_minus_beta2) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t groups = n / 4;
  for (size_t q = tid; q < groups; q += stride) {
    float4 hh = reinterpret_cast<const float4*>(h)[q];
    const float4 g = reinterpret_cast<const float4*>(ghat)[q];
    hh.x = hessian_one(hh.x, g.x, beta2, one_minus_beta2);
    hh.y = hessian_one(hh.y, g.y, beta2, one_minus_beta2);
    hh.z = hessian_one(hh.z, g.z, beta2, one_minus_beta2);
    hh.w = hessian_one(hh.w, g.w, beta2, one_minus_beta2);
    reinterpret_cast<float4*>(h)[q] = hh;
  }
  for (size_t i = groups * 4 + tid; i < n; i += stride)
    h[i] = hessian_one(h[i], ghat[i], beta2, one_minus_beta2);
}

constexpr int kCountThreads = 256;

// Scalar (coalesced) loads: a range of the table may start at any element.
__global__ void unclipped_count_kernel(unsigned long long* count, const float* m, const float* h, size_t n,
                                       float rho_b) {
  __shared__ unsigned int warp_counts[kCountThreads / 32];
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  unsigned int c = 0;  // at most n / (grid·threads) + 1 per thread: far below 2^32
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    c += fabsf(m[i]) < rho_b * h[i] ? 1u : 0u;
  for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_counts[warp] = c;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long total = 0;
    for (int w = 0; w < kCountThreads / 32; ++w) total += warp_counts[w];
    if (total) atomicAdd(count, total);
  }
}

std::string what(size_t n) { return "n=" + std::to_string(n); }

}  // namespace

void sophia_update(float* params, const float* grads, float* m, const float* h, const uint32_t* decay_mask,
                   size_t n, const SophiaArgs& a, Context& ctx) {
  MPT_PROFILE_RANGE("sophia_update");
  if (n == 0) return;
  MPT_CHECK(params && grads && m && h && decay_mask, "[sophia] null pointer: " + what(n));
  MPT_CHECK(aligned16(params) && aligned16(grads) && aligned16(m) && aligned16(h),
            "[sophia] params, grads, m and h must be 16-byte aligned: " + what(n));
  MPT_CHECK(a.rho_b > 0.0f && std::isfinite(a.rho_b),
            "[sophia] rho_b (rho times tokens per step) must be positive, got " + std::to_string(a.rho_b));
  // The factors as cpu sophia_update forms them: in double, rounded once.
  const UpdateCoeffs k{static_cast<float>(1.0 - static_cast<double>(a.lr) * a.weight_decay), a.beta1,
                       static_cast<float>(1.0 - static_cast<double>(a.beta1)), -a.lr, a.rho_b};
  const int threads = 256;
  const unsigned grid = grid_for(n / 4 > 0 ? n / 4 : n, threads, ctx.info().sm_count);
  sophia_update_kernel<<<grid, threads, 0, ctx.stream()>>>(params, grads, m, h, decay_mask, n, k,
                                                           a.grad_scale);
  MPT_CUDA_CHECK_LAUNCH("sophia_update_kernel");
}

void sophia_hessian_update(float* h, const float* ghat, size_t n, float beta2, Context& ctx) {
  MPT_PROFILE_RANGE("sophia_hessian_update");
  if (n == 0) return;
  MPT_CHECK(h && ghat, "[sophia_hessian] null pointer: " + what(n));
  MPT_CHECK(aligned16(h) && aligned16(ghat),
            "[sophia_hessian] h and ghat must be 16-byte aligned: " + what(n));
  MPT_CHECK(beta2 >= 0.0f && beta2 < 1.0f,
            "[sophia_hessian] beta2 must be in [0, 1), got " + std::to_string(beta2));
  const float one_minus_beta2 = static_cast<float>(1.0 - static_cast<double>(beta2));
  const int threads = 256;
  const unsigned grid = grid_for(n / 4 > 0 ? n / 4 : n, threads, ctx.info().sm_count);
  sophia_hessian_kernel<<<grid, threads, 0, ctx.stream()>>>(h, ghat, n, beta2, one_minus_beta2);
  MPT_CUDA_CHECK_LAUNCH("sophia_hessian_kernel");
}

void sophia_unclipped_count(unsigned long long* count, const float* m, const float* h, size_t n, float rho_b,
                            Context& ctx) {
  MPT_PROFILE_RANGE("sophia_unclipped_count");
  MPT_CHECK(count != nullptr, "[sophia_unclipped_count] null count pointer: " + what(n));
  MPT_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(unsigned long long), ctx.stream()));
  if (n == 0) return;
  MPT_CHECK(m && h, "[sophia_unclipped_count] null pointer: " + what(n));
  const unsigned grid = grid_for(n, kCountThreads, ctx.info().sm_count);
  unclipped_count_kernel<<<grid, kCountThreads, 0, ctx.stream()>>>(count, m, h, n, rho_b);
  MPT_CUDA_CHECK_LAUNCH("unclipped_count_kernel");
}

}  // namespace mptrain::cuda
