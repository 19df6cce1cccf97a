// Exact GELU (BERT's activation in Hugging Face): with Phi the standard normal CDF,
//   gelu(x)  = x·Phi(x) = 0.5·x·(1 + erf(x/sqrt(2)))
//   gelu'(x) = Phi(x) + x·phi(x),   phi(x) = exp(-x^2/2)/sqrt(2·pi).
// erf comes from libm (correctly rounded to within an ulp), so the forward matches PyTorch's
// fp32 GELU to the last bit or two; vexp keeps the derivative's exp vectorisable.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "backend/cpu/lowp.h"
#include "backend/cpu/vec_math.h"
#include "backend/ops/gelu_erf.h"

namespace mptrain::cpu {

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// The scalar math, shared by the fp32 and the typed variants.
inline float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2)); }
inline float gelu_erf_grad(float x, float dy) {
  const float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
  const float pdf = kInvSqrt2Pi * vexp(-0.5f * x * x);
  return (cdf + x * pdf) * dy;
}
}  // namespace

void gelu_erf_forward(float* out, const float* inp, size_t N) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(N);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) out[i] = gelu_erf(inp[i]);
}

void gelu_erf_backward(float* dinp, const float* inp, const float* dout, size_t N) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(N);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) dinp[i] = gelu_erf_grad(inp[i], dout[i]);
}

// Chunks of kChunk: widen the input, fp32 math, narrow the result once (as gelu.cpp's typed ops).
void gelu_erf_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N) {
  const std::ptrdiff_t chunks = static_cast<std::ptrdiff_t>((N + kChunk - 1) / kChunk);
  const size_t eo = storage_bytes(to), ei = storage_bytes(ti);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t c = 0; c < chunks; ++c) {
    const size_t i0 = static_cast<size_t>(c) * kChunk, len = std::min(kChunk, N - i0);
    float x[kChunk];
    dispatch_storage(ti, [&](auto t) {
      widen_span(x, reinterpret_cast<const decltype(t)*>(static_cast<const char*>(inp) + i0 * ei), len);
    });
    for (size_t i = 0; i < len; ++i) x[i] = gelu_erf(x[i]);
    dispatch_storage(to, [&](auto t) {
      narrow_span(reinterpret_cast<decltype(t)*>(static_cast<char*>(out) + i0 * eo), x, len);
    });
  }
}

void gelu_erf_backward_typed(void* dinp, StorageType td, const void* inp, StorageType ti, const float* dout,
                             size_t N) {
  const std::ptrdiff_t chunks = static_cast<std::ptrdiff_t>((N + kChunk - 1) / kChunk);
  const size_t ed = storage_bytes(td), ei = storage_bytes(ti);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t c = 0; c < chunks; ++c) {
    const size_t i0 = static_cast<size_t>(c) * kChunk, len = std::min(kChunk, N - i0);
    float x[kChunk];
    dispatch_storage(ti, [&](auto t) {
      widen_span(x, reinterpret_cast<const decltype(t)*>(static_cast<const char*>(inp) + i0 * ei), len);
    });
    for (size_t i = 0; i < len; ++i) x[i] = gelu_erf_grad(x[i], dout[i0 + i]);
    dispatch_storage(td, [&](auto t) {
      narrow_span(reinterpret_cast<decltype(t)*>(static_cast<char*>(dinp) + i0 * ed), x, len);
    });
  }
}

}  // namespace mptrain::cpu
