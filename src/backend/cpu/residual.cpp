// Elementwise add for the residual stream, and its backward (gradient accumulation).
#include "backend/ops/residual.h"

#include <cstddef>

namespace mptrain::cpu {

void residual_forward(float* out, const float* a, const float* b, size_t N) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(N);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void accumulate(float* dst, const float* src, size_t N) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(N);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace mptrain::cpu
