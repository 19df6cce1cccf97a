// GELU (tanh approximation). With u = sqrt(2/pi)·(x + 0.044715·x^3) and s = sigmoid(2u):
//   0.5·(1 + tanh(u)) = s,   so gelu(x) = x·s = x / (1 + exp(-2u)),
//   gelu'(x) = s + 2·x·s·(1 - s)·u'(x),   u'(x) = sqrt(2/pi)·(1 + 3·0.044715·x^2).
// The sigmoid form needs one exp and no tanh, and vexp keeps the loop vectorised.
#include "backend/ops/gelu.h"

#include <cstddef>

#include "backend/cpu/vec_math.h"

namespace mptrain::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
// exp(-2u) is clamped here so that 1 + e stays a normal float (x is then < -9 and gelu(x) is
// below 1e-34 in magnitude either way).
constexpr float kMaxExpArg = 80.0f;

inline float sigmoid_2u(float x) {
  float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  float a = -2.0f * u;
  a = a > kMaxExpArg ? kMaxExpArg : a;
  return 1.0f / (1.0f + vexp(a));
}
}  // namespace

void gelu_forward(float* out, const float* inp, size_t N) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(N);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    float x = inp[i];
    out[i] = x * sigmoid_2u(x);
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(N);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    float x = inp[i];
    float s = sigmoid_2u(x);
    float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    dinp[i] = (s + 2.0f * x * s * (1.0f - s) * du) * dout[i];
  }
}

}  // namespace mptrain::cpu
