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
#include "backend/ops/activations.h"

namespace mptrain::cpu {

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

inline float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2)); }
inline float gelu_erf_grad(float x, float dy) {
  const float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
  const float pdf = kInvSqrt2Pi * vexp(-0.5f * x * x);
  return (cdf + x * pdf) * dy;
}
}  // namespace

// Chunks widened to fp32, the same math, one rounding on output (lowp.h's map_chunks_typed).
void gelu_erf_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N) {
  map_chunks_typed(out, to, inp, ti, N, [](float* x, size_t, size_t len) {
    for (size_t i = 0; i < len; ++i) x[i] = gelu_erf(x[i]);
  });
}

void gelu_erf_backward_typed(void* dinp, StorageType td, const void* inp, StorageType ti, const float* dout,
                             size_t N) {
  map_chunks_typed(dinp, td, inp, ti, N, [dout](float* x, size_t i0, size_t len) {
    for (size_t i = 0; i < len; ++i) x[i] = gelu_erf_grad(x[i], dout[i0 + i]);
  });
}

}  // namespace mptrain::cpu
