// Token + position embedding. The backward scatters into dwte rows chosen by token id, so two
// positions with the same token write the same row: it is parallel over strips of channels
// instead of over positions, which keeps it race-free and deterministic for any thread count
// (every element is summed over (b, t) in order).
#include "backend/ops/encoder.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace mptrain::cpu {

namespace {
constexpr int kStrip = 64;  // channels per task: 256 bytes, so threads never share a cache line
}

void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C) {
  MPT_CHECK(B >= 0 && T >= 0 && C >= 0, "[encoder_forward] negative size B=" + std::to_string(B) +
                                            " T=" + std::to_string(T) + " C=" + std::to_string(C));
  const int BT = B * T;
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < BT; ++bt) {
    const int t = bt % T;
    float* o = out + static_cast<size_t>(bt) * C;
    const float* e = wte + static_cast<size_t>(tokens[bt]) * C;
    const float* p = wpe + static_cast<size_t>(t) * C;
    for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
  }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C) {
  MPT_CHECK(B >= 0 && T >= 0 && C >= 0, "[encoder_backward] negative size B=" + std::to_string(B) +
                                            " T=" + std::to_string(T) + " C=" + std::to_string(C));
  const int strips = (C + kStrip - 1) / kStrip;
#pragma omp parallel for schedule(static)
  for (int s = 0; s < strips; ++s) {
    const int c0 = s * kStrip;
    const int width = std::min(kStrip, C - c0);
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < T; ++t) {
        const size_t bt = static_cast<size_t>(b) * T + t;
        const float* d = dout + bt * C + c0;
        float* we = dwte + static_cast<size_t>(tokens[bt]) * C + c0;
        float* pe = dwpe + static_cast<size_t>(t) * C + c0;
        for (int c = 0; c < width; ++c) {
          we[c] += d[c];
          pe[c] += d[c];
        }
      }
    }
  }
}

}  // namespace mptrain::cpu
