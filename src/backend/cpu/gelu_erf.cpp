// Exact GELU (BERT's activation in Hugging Face): with Phi the standard normal CDF,
//   gelu(x)  = x·Phi(x) = 0.5·x·(1 + erf(x/sqrt(2)))
//   gelu'(x) = Phi(x) + x·phi(x),   phi(x) = exp(-x^2/2)/sqrt(2·pi).
// erf comes from libm (correctly rounded to within an ulp), so the forward matches PyTorch's
// fp32 GELU to the last bit or two; vexp keeps the derivative's exp vectorisable.
#include <cmath>
#include <cstddef>

#include "backend/cpu/vec_math.h"
#include "backend/ops/gelu_erf.h"

namespace mptrain::cpu {

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
}  // namespace

void gelu_erf_forward(float* out, const float* inp, size_t N) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(N);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
  }
}

void gelu_erf_backward(float* dinp, const float* inp, const float* dout, size_t N) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(N);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * vexp(-0.5f * x * x);
    dinp[i] = (cdf + x * pdf) * dout[i];
  }
}

}  // namespace mptrain::cpu
