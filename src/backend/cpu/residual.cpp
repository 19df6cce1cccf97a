// Elementwise add for the residual stream, and the residual add fused with a linear's bias.
#include "backend/ops/residual.h"

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "backend/cpu/lowp.h"

namespace mptrain::cpu {

void residual_forward(float* out, const float* a, const float* b, size_t N) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(N);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void residual_bias_forward(float* out, const float* residual, const float* acc, const float* bias, StorageType round_to,
                           int N, int OC) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const size_t row = static_cast<size_t>(n) * OC;
    float tmp[kChunk];
    for (int c0 = 0; c0 < OC; c0 += static_cast<int>(kChunk)) {
      const int len = std::min(static_cast<int>(kChunk), OC - c0);
      const float* a = acc + row + c0;
      for (int c = 0; c < len; ++c) tmp[c] = a[c] + (bias ? bias[c0 + c] : 0.0f);
      // Round to the linear's output dtype and back (a no-op for fp32).
      dispatch_storage(round_to, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, float>) {
          T h[kChunk];
          narrow_span(h, tmp, len);
          widen_span(tmp, h, len);
        }
      });
      const float* r = residual + row + c0;
      float* o = out + row + c0;
      for (int c = 0; c < len; ++c) o[c] = r[c] + tmp[c];
    }
  }
}

}  // namespace mptrain::cpu
