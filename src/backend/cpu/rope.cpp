// Rotary position embeddings on the CPU (backend/ops/rope.h). The cos and sin of the T × head_size/2
// angles are tabled once per call (they depend on the position and the pair only); each row then
// turns its heads' channel pairs from the table, rows in parallel (every element written by one
// thread, so results do not depend on the thread count).
#include "backend/ops/rope.h"

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"

namespace mptrain::cpu {

void rope(float* x, int rows, int W, int T, int heads, int head_size, float theta, bool inverse) {
  MPT_CHECK(rows >= 0 && T > 0 && rows % T == 0 && head_size > 0 && head_size % 2 == 0 && heads > 0 &&
                static_cast<long long>(heads) * head_size <= W,
            "[rope] bad sizes: rows=" + std::to_string(rows) + " W=" + std::to_string(W) +
                " T=" + std::to_string(T) + " heads=" + std::to_string(heads) +
                " head_size=" + std::to_string(head_size));
  const int half = head_size / 2;
  std::vector<float> cs(static_cast<size_t>(T) * half), sn(cs.size());
  for (int i = 0; i < half; ++i) {
    // transformers: 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), all in fp32
    const float inv_freq = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_size));
    for (int t = 0; t < T; ++t) {
      const float angle = static_cast<float>(t) * inv_freq;
      cs[static_cast<size_t>(t) * half + i] = std::cos(angle);
      sn[static_cast<size_t>(t) * half + i] = inverse ? -std::sin(angle) : std::sin(angle);
    }
  }
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const size_t t = static_cast<size_t>(r % T);
    const float* c = cs.data() + t * half;
    const float* s = sn.data() + t * half;
    for (int h = 0; h < heads; ++h) {
      float* a = x + static_cast<size_t>(r) * W + static_cast<size_t>(h) * head_size;
      float* b = a + half;
#pragma omp simd
      for (int i = 0; i < half; ++i) {
        const float ai = a[i], bi = b[i];
        a[i] = ai * c[i] - bi * s[i];
        b[i] = bi * c[i] + ai * s[i];
      }
    }
  }
}

}  // namespace mptrain::cpu
