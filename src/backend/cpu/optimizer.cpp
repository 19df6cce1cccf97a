// The CPU backend's optimizer kernels (backend/ops/optimizer.h).
//
// AdamW's update, one pass over the buffers (elementwise, so any thread split gives the same bits).
//
// Every form spells out the same operations, each fma explicit, so that no compiler's choice of
// contraction can make an element's bits depend on where it falls (a vector body or a scalar
// tail, a whole table or one tensor's range: DecayMask.OneMaskedUpdateEqualsOneUpdatePerRange):
//   m' = fma(β1, m, (1−β1)·g)          v' = fma(β2, v, ((1−β2)·g)·g)
//   denom = sqrt(v')/sqrt(bc2) + eps    p' = fma(p, decay, −(step·m')/denom)
// (IEEE sqrt, division and fma are correctly rounded in every form.) With AVX-512 the loop is
// written with intrinsics (the mask's 16 bits per vector as a blend); elsewhere the scalar form
// runs under `omp simd`, which vectorises now that the kernels are built without errno
// (CMakeLists.txt: std::sqrt may not set it); before that it ran one element at a time, ~15% of
// a bf16 training step.
#include "backend/ops/optimizer.h"

#include "backend/cpu/lowp.h"
#include "backend/ops/gemm_mixed.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace mptrain::cpu {

namespace {

struct AdamWCoef {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, eps, step_size, decay, grad_scale;
};

// The decay factor of element i: `decay` where bit i of the mask is set (everywhere without a
// mask), else exactly 1 (what 1 − lr·0 rounds to), so a masked update has the bits of one update
// per tensor.
inline float decay_of(const std::uint32_t* mask, size_t i, float decay) {
  return !mask || ((mask[i >> 5] >> (i & 31)) & 1u) ? decay : 1.0f;
}

inline void adamw_scalar(float& p, float g_raw, float& m, float& v, const AdamWCoef& k, float decay) {
  const float g = g_raw * k.grad_scale;
  const float mi = std::fma(k.beta1, m, k.one_minus_beta1 * g);
  const float vi = std::fma(k.beta2, v, (k.one_minus_beta2 * g) * g);
  m = mi;
  v = vi;
  const float denom = std::sqrt(vi) / k.bc2_sqrt + k.eps;
  p = std::fma(p, decay, -((k.step_size * mi) / denom));
}

#if defined(__AVX512F__)
// Elements [i0, i1) of the buffers; i0 and i1 multiples of 16 (so a vector's 16 mask bits lie in
// one 32-bit word).
inline void adamw_avx512(float* p, const float* g, float* m, float* v, size_t i0, size_t i1,
                         const AdamWCoef& k, const std::uint32_t* mask) {
  const __m512 b1 = _mm512_set1_ps(k.beta1), omb1 = _mm512_set1_ps(k.one_minus_beta1);
  const __m512 b2 = _mm512_set1_ps(k.beta2), omb2 = _mm512_set1_ps(k.one_minus_beta2);
  const __m512 bc2s = _mm512_set1_ps(k.bc2_sqrt), eps = _mm512_set1_ps(k.eps);
  const __m512 step = _mm512_set1_ps(k.step_size), decay = _mm512_set1_ps(k.decay);
  const __m512 scale = _mm512_set1_ps(k.grad_scale), one = _mm512_set1_ps(1.0f);
  for (size_t i = i0; i < i1; i += 16) {
    const __m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g + i), scale);
    const __m512 mi = _mm512_fmadd_ps(b1, _mm512_loadu_ps(m + i), _mm512_mul_ps(omb1, gi));
    const __m512 vi = _mm512_fmadd_ps(b2, _mm512_loadu_ps(v + i), _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    // The masked sqrt with a zero source sidesteps GCC 12's false -Wmaybe-uninitialized inside
    // the unmasked intrinsic (as in backend/cpu/lowp.h).
    const __m512 root = _mm512_mask_sqrt_ps(_mm512_setzero_ps(), 0xffff, vi);
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(root, bc2s), eps);
    const __m512 upd = _mm512_div_ps(_mm512_mul_ps(step, mi), denom);
    const __m512 d =
        mask ? _mm512_mask_blend_ps(static_cast<__mmask16>(mask[i >> 5] >> (i & 31)), one, decay) : decay;
    _mm512_storeu_ps(p + i, _mm512_fmsub_ps(_mm512_loadu_ps(p + i), d, upd));
  }
}
#endif

// sum g² over [lo, hi) in kLanes independent partial sums (element i goes to lane i % kLanes),
// added in lane order at the end. One running sum would be a chain of dependent double adds,
// 4 cycles per element, which held this pass at ~5 GB/s (three times slower than AdamW's update,
// which moves seven times the bytes); independent lanes vectorise and keep it at memory speed.
// The order is fixed by the code, not by the vector width or the thread count.
double block_sum_of_squares(const float* g, size_t lo, size_t hi) {
  constexpr size_t kLanes = 32;
  double lane[kLanes] = {};
  size_t i = lo;
  for (; i + kLanes <= hi; i += kLanes) {
#pragma omp simd
    for (size_t j = 0; j < kLanes; ++j) lane[j] += static_cast<double>(g[i + j]) * g[i + j];
  }
  for (size_t j = 0; i < hi; ++i, ++j) lane[j] += static_cast<double>(g[i]) * g[i];
  double s = 0.0;
  for (double x : lane) s += x;
  return s;
}

}  // namespace

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t t, float grad_scale,
                  const std::uint32_t* decay_mask, const OperandCopyOut& copy) {
  // Bias corrections in double, as PyTorch computes them on the host in Python floats.
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t));
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = 1.0f - lr * weight_decay;
  const AdamWCoef k{beta1, 1.0f - beta1, beta2, 1.0f - beta2, bc2_sqrt, eps, step_size, decay, grad_scale};
  const size_t copy_bytes = storage_bytes(copy.type);
  // Elements [i0, i1) (i0 a multiple of 16): the update, then their copy while they are in L1.
  const auto update = [&](size_t i0, size_t i1) {
    size_t i = i0;
#if defined(__AVX512F__)
    const size_t vec_end = i0 + (i1 - i0) / 16 * 16;
    adamw_avx512(params, grads, m, v, i0, vec_end, k, decay_mask);
    i = vec_end;
#endif
#pragma omp simd
    for (size_t j = i; j < i1; ++j) adamw_scalar(params[j], grads[j], m[j], v[j], k, decay_of(decay_mask, j, decay));
    if (copy.ptr)
      format_run(static_cast<char*>(copy.ptr) + i0 * copy_bytes, copy.type, params + i0, StorageType::F32, i1 - i0,
                 copy.math);
  };
  // Blocks of kChunk elements (a multiple of the vector width, the chunk format_run works in) as
  // OpenMP's unit of work.
  const std::ptrdiff_t blocks = static_cast<std::ptrdiff_t>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t b = 0; b < blocks; ++b) {
    const size_t i0 = static_cast<size_t>(b) * kChunk;
    update(i0, std::min(n, i0 + kChunk));
  }
}

// Sophia-G, in the fp32 order of the authors' PyTorch code, so that a transcription of it agrees
// to fp32 rounding:
//   param.mul_(1 − lr·wd)                     (the factor rounded once to fp32)
//   exp_avg.mul_(β1).add_(grad, alpha=1−β1)
//   ratio = (|exp_avg| / (ρ·bs·hess + 1e-15)).clamp(max=1)
//   param.addcmul_(sign(exp_avg), ratio, value=−lr)
void sophia_update(float* params, const float* grads, float* m, const float* h, size_t n, float lr,
                   float beta1, float rho_b, float weight_decay, float grad_scale,
                   const std::uint32_t* decay_mask) {
  // Host-side factors in double, rounded once, as PyTorch does with Python floats.
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  const float one_minus_beta1 = static_cast<float>(1.0 - static_cast<double>(beta1));
  const float neg_lr = -lr;
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float p = params[i] * decay_of(decay_mask, i, decay);
    const float mi = m[i] * beta1 + one_minus_beta1 * (grads[i] * grad_scale);
    m[i] = mi;
    const float ratio = std::fmin(std::fabs(mi) / (rho_b * h[i] + 1e-15f), 1.0f);
    const float sign = mi > 0.0f ? 1.0f : (mi < 0.0f ? -1.0f : 0.0f);
    params[i] = p + neg_lr * sign * ratio;
  }
}

void sophia_hessian_update(float* h, const float* ghat, size_t n, float beta2) {
  const float one_minus_beta2 = static_cast<float>(1.0 - static_cast<double>(beta2));
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) h[i] = h[i] * beta2 + one_minus_beta2 * ghat[i] * ghat[i];
}

size_t sophia_unclipped_count(const float* m, const float* h, size_t n, float rho_b) {
  size_t count = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : count)
  for (size_t i = 0; i < n; ++i) count += std::fabs(m[i]) < rho_b * h[i] ? 1 : 0;
  return count;
}

// Fixed-size blocks reduced independently (in parallel), then the block sums added in index order.
double sum_of_squares(const float* x, size_t n) {
  constexpr size_t kBlock = 1 << 16;
  const size_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks, 0.0);
#pragma omp parallel for schedule(static)
  for (size_t b = 0; b < blocks; ++b)
    partial[b] = block_sum_of_squares(x, b * kBlock, std::min(n, (b + 1) * kBlock));
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

void scale(float* x, size_t n, float factor) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) x[i] *= factor;
}

void muon_momentum(float* m, const float* grads, float* u, int64_t rows, int64_t cols, int64_t ld, float mu,
                   bool nesterov, float grad_scale) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* mr = m + r * ld;
    const float* gr = grads + r * ld;
    float* ur = u + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const float g = gr[c] * grad_scale;
      const float mi = mu * mr[c] + g;
      mr[c] = mi;
      ur[c] = nesterov ? g + mu * mi : mi;
    }
  }
}

void muon_update(float* params, const float* o, int64_t rows, int64_t cols, int64_t ld, float lr,
                 float weight_decay, float scale) {
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  const float step = static_cast<float>(-static_cast<double>(lr) * scale);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* pr = params + r * ld;
    const float* orow = o + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) pr[c] = pr[c] * decay + step * orow[c];
  }
}

void scale_add(float* c, const float* acc, size_t n, float alpha, float beta) {
  if (beta == 0.0f) {  // c's old values are ignored, NaN included (BLAS's rule)
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) c[i] = alpha * acc[i];
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) c[i] = alpha * acc[i] + beta * c[i];
}

bool unscale_and_check(float* grads, size_t n, float inv_scale) {
  int found = 0;
#pragma omp parallel for reduction(| : found) schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i];
    found |= !std::isfinite(g);
    grads[i] = g * inv_scale;
  }
  return found != 0;
}

}  // namespace mptrain::cpu
