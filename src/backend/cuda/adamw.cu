// The fused AdamW kernel: a grid-stride loop over groups of 4 parameters (16-byte loads of
// params, grads, m, v), scalar elements before the first 16-byte boundary (a range that starts
// inside a buffer: Muon's AdamW runs between its matrices, after BERT's 2-element NSP bias) and
// after the last, the decay bit of each element from the mask. The
// bias corrections are formed on the host in double, as cpu adamw_update does, so the
// per-element arithmetic is the CPU's.
#include <algorithm>
#include <cmath>
#include <cstdint>
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

__device__ __forceinline__ bool decays(const uint32_t* mask, size_t i) { return (mask[i >> 5] >> (i & 31)) & 1u; }

// Elements [0, head) and [head + 4·groups, n) one by one; the groups of 4 between them with
// 16-byte accesses (params + head is 16-byte aligned, and so are grads, m and v there).
__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, const uint32_t* mask,
                             size_t n, size_t head, Coeffs k, float gs) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t groups = (n - head) / 4;
  for (size_t q = tid; q < groups; q += stride) {
    const size_t i = head + q * 4;
    float4 p = reinterpret_cast<const float4*>(params + head)[q];
    const float4 g = reinterpret_cast<const float4*>(grads + head)[q];
    float4 mm = reinterpret_cast<const float4*>(m + head)[q];
    float4 vv = reinterpret_cast<const float4*>(v + head)[q];
    p.x = adamw_one(p.x, g.x * gs, mm.x, vv.x, decays(mask, i), k);
    p.y = adamw_one(p.y, g.y * gs, mm.y, vv.y, decays(mask, i + 1), k);
    p.z = adamw_one(p.z, g.z * gs, mm.z, vv.z, decays(mask, i + 2), k);
    p.w = adamw_one(p.w, g.w * gs, mm.w, vv.w, decays(mask, i + 3), k);
    reinterpret_cast<float4*>(params + head)[q] = p;
    reinterpret_cast<float4*>(m + head)[q] = mm;
    reinterpret_cast<float4*>(v + head)[q] = vv;
  }
  const size_t tail = head + groups * 4;
  for (size_t j = tid; j < head + (n - tail); j += stride) {
    const size_t i = j < head ? j : tail + (j - head);
    params[i] = adamw_one(params[i], grads[i] * gs, m[i], v[i], decays(mask, i), k);
  }
}

// The elements before the first 16-byte boundary of params, when grads, m and v share its
// offset from one (one allocation per role, the same range in each); else all of them.
size_t scalar_head(const float* params, const float* grads, const float* m, const float* v, size_t n) {
  const auto off = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16; };
  if (off(params) % sizeof(float) != 0 || off(grads) != off(params) || off(m) != off(params) ||
      off(v) != off(params))
    return n;
  return std::min(n, (16 - off(params)) % 16 / sizeof(float));
}

}  // namespace

void adamw_update(float* params, const float* grads, float* m, float* v, const uint32_t* decay_mask, size_t n,
                  const AdamWArgs& a, Context& ctx) {
  MPT_PROFILE_RANGE("adamw_update");
  const std::string what = "n=" + std::to_string(n) + " t=" + std::to_string(a.t);
  MPT_CHECK(a.t >= 1, "[adamw] step t must be >= 1: " + what);
  if (n == 0) return;
  MPT_CHECK(params && grads && m && v && decay_mask, "[adamw] null pointer: " + what);
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
  adamw_kernel<<<grid, threads, 0, ctx.stream()>>>(params, grads, m, v, decay_mask, n,
                                                   scalar_head(params, grads, m, v, n), k, a.grad_scale);
  MPT_CUDA_CHECK_LAUNCH("adamw_kernel");
}

}  // namespace mptrain::cuda
