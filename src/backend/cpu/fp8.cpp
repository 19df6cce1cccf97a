// FP8's kernels on the CPU (backend/ops/fp8.h).
#include "backend/ops/fp8.h"

#include <algorithm>
#include <cmath>

namespace mptrain::cpu {

void fp8_cast(float* out, const float* x, size_t n, float scale, Fp8Format format, bool saturate) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = fp8_round(x[i] * scale, format, saturate);
}

float amax(const float* x, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (std::isnan(a)) return a;
    m = std::max(m, a);
  }
  return m;
}

}  // namespace mptrain::cpu
