// AdamW update, one pass over the buffers (elementwise, so any thread split gives
// the same bits).
//
// The loop is written with AVX-512 intrinsics because g++ leaves the plain loop scalar: std::sqrt
// may set errno, which blocks vectorisation (the profile showed vsqrtss/vdivss one element at a
// time, ~15% of a bf16 training step). The vector and the scalar tail spell out the same
// operations, fused the same way g++ fused the old scalar code, so the results are bit-identical
// to it:
//   m' = fma(β1, m, (1−β1)·g)          v' = fma(β2, v, ((1−β2)·g)·g)
//   denom = sqrt(v')/sqrt(bc2) + eps    p' = fma(p, decay, −(step·m')/denom)
// (IEEE sqrt, division and fma are correctly rounded in both forms.) Without AVX-512 the plain
// expression runs and the compiler decides.
#include "optim/adamw.h"

#include <cmath>
#include <cstddef>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace mptrain {

namespace {

struct AdamWCoef {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, eps, step_size, decay, grad_scale;
};

#if defined(__AVX512F__)
inline void adamw_scalar(float& p, float g_raw, float& m, float& v, const AdamWCoef& k) {
  const float g = g_raw * k.grad_scale;
  const float mi = std::fma(k.beta1, m, k.one_minus_beta1 * g);
  const float vi = std::fma(k.beta2, v, (k.one_minus_beta2 * g) * g);
  m = mi;
  v = vi;
  const float denom = std::sqrt(vi) / k.bc2_sqrt + k.eps;
  p = std::fma(p, k.decay, -((k.step_size * mi) / denom));
}

// Elements [i0, i1) of the buffers; i1 - i0 a multiple of 16.
inline void adamw_avx512(float* p, const float* g, float* m, float* v, size_t i0, size_t i1, const AdamWCoef& k) {
  const __m512 b1 = _mm512_set1_ps(k.beta1), omb1 = _mm512_set1_ps(k.one_minus_beta1);
  const __m512 b2 = _mm512_set1_ps(k.beta2), omb2 = _mm512_set1_ps(k.one_minus_beta2);
  const __m512 bc2s = _mm512_set1_ps(k.bc2_sqrt), eps = _mm512_set1_ps(k.eps);
  const __m512 step = _mm512_set1_ps(k.step_size), decay = _mm512_set1_ps(k.decay);
  const __m512 scale = _mm512_set1_ps(k.grad_scale);
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
    _mm512_storeu_ps(p + i, _mm512_fmsub_ps(_mm512_loadu_ps(p + i), decay, upd));
  }
}
#endif

}  // namespace

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t t, float grad_scale) {
  // Bias corrections in double, as PyTorch computes them on the host in Python floats.
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t));
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = 1.0f - lr * weight_decay;
#if defined(__AVX512F__)
  const AdamWCoef k{beta1, 1.0f - beta1, beta2, 1.0f - beta2, bc2_sqrt, eps, step_size, decay, grad_scale};
  // Blocks of 1024 elements (a multiple of the vector width) as OpenMP's unit of work.
  constexpr size_t kBlock = 1024;
  const std::ptrdiff_t blocks = static_cast<std::ptrdiff_t>(n / kBlock);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t b = 0; b < blocks; ++b)
    adamw_avx512(params, grads, m, v, static_cast<size_t>(b) * kBlock, static_cast<size_t>(b + 1) * kBlock, k);
  size_t i = static_cast<size_t>(blocks) * kBlock;
  const size_t vec_end = i + (n - i) / 16 * 16;
  adamw_avx512(params, grads, m, v, i, vec_end, k);
  for (i = vec_end; i < n; ++i) adamw_scalar(params[i], grads[i], m[i], v[i], k);
#else
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i] * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    params[i] = params[i] * decay - step_size * mi / denom;
  }
#endif
}

AdamW::AdamW(const ParamTable& table, const AdamWHyper& hyper)
    : Optimizer(table, {"exp_avg", "exp_avg_sq"}), hyper_(hyper) {}

void AdamW::step(float* params, const float* grads, float lr, int64_t t, float grad_scale) {
  for (const auto& spec : table_.specs()) {
    const size_t o = spec.offset;
    adamw_update(params + o, grads + o, m().data() + o, v().data() + o, spec.numel, lr, hyper_.beta1, hyper_.beta2,
                 hyper_.eps, spec.decay ? hyper_.weight_decay : 0.0f, t, grad_scale);
  }
}

}  // namespace mptrain
