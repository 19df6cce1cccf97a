// Input embeddings, GPT-2's (word + position) and BERT's (+ token type). The backward scatters
// into rows chosen by id, so two positions with the same token write the same row: it is parallel
// over strips of channels instead of over positions, which keeps it race-free and deterministic
// for any thread count (every element is summed over (b, t) in order). The forward sums in
// PyTorch's order: (word + type) + pos.
#include "backend/ops/embeddings.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace mptrain::cpu {

namespace {
constexpr int kStrip = 64;  // channels per task: 256 bytes, so threads never share a cache line

void check(const char* op, int B, int T, int C) {
  MPT_CHECK(B >= 0 && T >= 0 && C >= 0, std::string("[") + op + "] negative size B=" + std::to_string(B) +
                                            " T=" + std::to_string(T) + " C=" + std::to_string(C));
}
}  // namespace

void embeddings_forward(float* out, const int* tokens, const int* types, const float* word, const float* pos,
                        const float* type, int B, int T, int C) {
  check("embeddings_forward", B, T, C);
  const int BT = B * T;
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < BT; ++bt) {
    const int t = bt % T;
    float* o = out + static_cast<size_t>(bt) * C;
    const float* w = word + static_cast<size_t>(tokens[bt]) * C;
    const float* p = pos + static_cast<size_t>(t) * C;
    if (types) {
      const float* y = type + static_cast<size_t>(types[bt]) * C;
      for (int c = 0; c < C; ++c) o[c] = (w[c] + y[c]) + p[c];
    } else {
      for (int c = 0; c < C; ++c) o[c] = w[c] + p[c];
    }
  }
}

void embeddings_backward(float* dword, float* dpos, float* dtype, const float* dout, const int* tokens,
                         const int* types, int pad_token, int B, int T, int C) {
  check("embeddings_backward", B, T, C);
  const int strips = (C + kStrip - 1) / kStrip;
#pragma omp parallel for schedule(static)
  for (int s = 0; s < strips; ++s) {
    const int c0 = s * kStrip;
    const int width = std::min(kStrip, C - c0);
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < T; ++t) {
        const size_t bt = static_cast<size_t>(b) * T + t;
        const float* d = dout + bt * C + c0;
        float* p = dpos + static_cast<size_t>(t) * C + c0;
        for (int c = 0; c < width; ++c) p[c] += d[c];
        if (types) {
          float* y = dtype + static_cast<size_t>(types[bt]) * C + c0;
          for (int c = 0; c < width; ++c) y[c] += d[c];
        }
        if (tokens[bt] == pad_token) continue;
        float* w = dword + static_cast<size_t>(tokens[bt]) * C + c0;
        for (int c = 0; c < width; ++c) w[c] += d[c];
      }
    }
  }
}

}  // namespace mptrain::cpu
