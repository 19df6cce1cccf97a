// The fused AdamW kernel: a grid-stride loop over groups of 4 parameters (16-byte loads of
// params, grads, m, v), a scalar tail, the decay bit of each element from the mask. The
// bias corrections are formed on the host in double, as cpu adamw_update does, so the
// per-element arithmetic is the CPU's.
#include <cmath>
#include <string>

#include "backend/cuda/adamw.h"
#include "backend/cuda/check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

struct Coeffs {
  float beta1, beta2, eps, step_size, bc2_sqrt, decay;  // decay = 1 - lr·weight_decay
};

__device__ __forceinline__ float adamw_one(float p, float g, float& m, float& v, bool decayed,
                                           const Coeffs& k) {
  const float mi = k.beta1 * m + (1.0f - k.beta1) * g;
  const float vi = k.beta2 * v + (1.0f - k.beta2) * g * g;
  m = mi;
  v = vi;
  const float denom = sqrtf(vi) / k.bc2_sqrt + k.eps;
  return p * (decayed ? k.decay : 1.0f) - k.step_size * mi / denom;
}

__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, const uint32_t* mask,
                             size_t n, Coeffs k, float gs) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t groups = n / 4;
  for (size_t q = tid; q < groups; q += stride) {
    const size_t i = q * 4;
    float4 p = reinterpret_cast<const float4*>(params)[q];
    const float4 g = reinterpret_cast<const float4*>(grads)[q];
    float4 mm = reinterpret_cast<const float4*>(m)[q];
    float4 vv = reinterpret_cast<const float4*>(v)[q];
    const uint32_t bits = mask[i >> 5] >> (i & 31);  // i % 4 == 0: the 4 bits share one word
    p.x = adamw_one(p.x, g.x * gs, mm.x, vv.x, bits & 1u, k);
    p.y = adamw_one(p.y, g.y * gs, mm.y, vv.y, bits & 2u, k);
    p.z = adamw_one(p.z, g.z * gs, mm.z, vv.z, bits & 4u, k);
    p.w = adamw_one(p.w, g.w * gs, mm.w, vv.w, bits & 8u, k);
    reinterpret_cast<float4*>(params)[q] = p;
    reinterpret_cast<float4*>(m)[q] = mm;
    reinterpret_cast<float4*>(v)[q] = vv;
  }
  for (size_t i = groups * 4 + tid; i < n; i += stride) {
    const bool decayed = (mask[i >> 5] >> (i & 31)) & 1u;
    params[i] = adamw_one(params[i], grads[i] * gs, m[i], v[i], decayed, k);
  }
}

}  // namespace

void adamw_update(float* params, const float* grads, float* m, float* v, const uint32_t* decay_mask, size_t n,
                  const AdamWArgs& a, Context& ctx) {
  MPT_PROFILE_RANGE("adamw_update");
  const std::string what = "n=" + std::to_string(n) + " t=" + std::to_string(a.t);
  MPT_CHECK(a.t >= 1, "[adamw] step t must be >= 1: " + what);
  if (n == 0) return;
  MPT_CHECK(params && grads && m && v && decay_mask, "[adamw] null pointer: " + what);
  MPT_CHECK(aligned16(params) && aligned16(grads) && aligned16(m) && aligned16(v),
            "[adamw] params, grads, m and v must be 16-byte aligned: " + what);
  const double bc1 = 1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(a.t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(a.t));
  const Coeffs k{a.beta1,
                 a.beta2,
                 a.eps,
                 static_cast<float>(a.lr / bc1),
                 static_cast<float>(std::sqrt(bc2)),
                 1.0f - a.lr * a.weight_decay};
  // 256 threads, a grid-stride loop over groups of 4: purely bandwidth-bound.
  const int threads = 256;
  const unsigned grid = grid_for(n / 4 > 0 ? n / 4 : n, threads, ctx.info().sm_count);
  adamw_kernel<<<grid, threads, 0, ctx.stream()>>>(params, grads, m, v, decay_mask, n, k, a.grad_scale);
  MPT_CUDA_CHECK_LAUNCH("adamw_kernel");
}

}  // namespace mptrain::cuda
