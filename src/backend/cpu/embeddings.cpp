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

// Where sequence b's rows start and how many it has: packed (cu_seqlens) or B·T.
struct Rows {
  const int* cu;
  int T;
  size_t first(int b) const { return cu ? static_cast<size_t>(cu[b]) : static_cast<size_t>(b) * T; }
  int length(int b) const { return cu ? cu[b + 1] - cu[b] : T; }
};

void check_packing(const char* op, const int* cu, int B, int T) {
  if (!cu) return;
  MPT_CHECK(cu[0] == 0, std::string("[") + op + "] cu_seqlens does not start at 0");
  for (int b = 0; b < B; ++b)
    MPT_CHECK(cu[b + 1] > cu[b] && cu[b + 1] - cu[b] <= T,
              std::string("[") + op + "] packed sequence " + std::to_string(b) + " has " +
                  std::to_string(cu[b + 1] - cu[b]) + " rows, not in [1, " + std::to_string(T) + "]");
}
}  // namespace

void embeddings_forward(float* out, const int* tokens, const int* types, const float* word, const float* pos,
                        const float* type, int B, int T, int C, const int* cu_seqlens) {
  check("embeddings_forward", B, T, C);
  check_packing("embeddings_forward", cu_seqlens, B, T);
  const Rows rows{cu_seqlens, T};
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      if (t >= rows.length(b)) continue;
      const size_t bt = rows.first(b) + static_cast<size_t>(t);
      float* o = out + bt * C;
      const float* w = word + static_cast<size_t>(tokens[bt]) * C;
      const float* p = pos ? pos + static_cast<size_t>(t) * C : nullptr;
      if (types) {
        const float* y = type + static_cast<size_t>(types[bt]) * C;
        if (p)
          for (int c = 0; c < C; ++c) o[c] = (w[c] + y[c]) + p[c];
        else
          for (int c = 0; c < C; ++c) o[c] = w[c] + y[c];
      } else if (p) {
        for (int c = 0; c < C; ++c) o[c] = w[c] + p[c];
      } else {
        for (int c = 0; c < C; ++c) o[c] = w[c];
      }
    }
}

void embeddings_backward(float* dword, float* dpos, float* dtype, const float* dout, const int* tokens,
                         const int* types, int pad_token, int B, int T, int C, const int* cu_seqlens) {
  check("embeddings_backward", B, T, C);
  check_packing("embeddings_backward", cu_seqlens, B, T);
  const Rows rows{cu_seqlens, T};
  const int strips = (C + kStrip - 1) / kStrip;
#pragma omp parallel for schedule(static)
  for (int s = 0; s < strips; ++s) {
    const int c0 = s * kStrip;
    const int width = std::min(kStrip, C - c0);
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < rows.length(b); ++t) {
        const size_t bt = rows.first(b) + static_cast<size_t>(t);
        const float* d = dout + bt * C + c0;
        if (dpos) {
          float* p = dpos + static_cast<size_t>(t) * C + c0;
          for (int c = 0; c < width; ++c) p[c] += d[c];
        }
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
