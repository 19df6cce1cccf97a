// LayerNorm forward and backward over rows of C channels. Statistics are two-pass fp32
// (mean, then the mean of squared deviations) with SIMD-lane partial sums, whose order is fixed
// at compile time, so results are identical run to run.
//
// Backward, per row (norm = (x - mean)·rstd, g = weight ⊙ dout):
//   dinp   += rstd · (g - mean(g) - norm · mean(g ⊙ norm))
//   dweight += dout ⊙ norm,   dbias += dout       (summed over rows)
// RMSNorm (rms) is the same with mean = 0 and no mean(g) term (nothing was subtracted), no bias.
// The sums over rows go through kChunks fixed row ranges: each range adds its rows in order into
// its own partial, then the partials are added in range order. Neither step depends on the
// number of threads, so the gradients are bit-identical for any OMP_NUM_THREADS.
#include "backend/ops/layernorm.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "backend/cpu/lowp.h"
#include "core/error.h"

namespace mptrain::cpu {

namespace {
constexpr int kChunks = 64;
constexpr int kStrip = 64;  // channels per task in the final reduction (256 bytes)

std::string dims(int N, int C) { return "N=" + std::to_string(N) + " C=" + std::to_string(C); }

// Row n's first element (ops/layernorm.h: rows in groups at a stride, or contiguous).
struct RowAt {
  std::int64_t C, groups, stride;
  size_t operator()(int n) const {
    return static_cast<size_t>(groups == 1 ? n * stride : n / groups * stride + n % groups * C);
  }
};
RowAt row_at(int C, std::int64_t groups, std::int64_t stride) {
  MPT_CHECK(
      groups >= 1 && (stride == 0 || stride >= groups * C),
      "[layernorm] bad row groups: groups=" + std::to_string(groups) + " stride=" + std::to_string(stride));
  return {C, groups, stride ? stride : static_cast<std::int64_t>(C) * groups};
}

// Mean and 1/sqrt(variance + eps) of one row x[0, C) (inv_c = 1/C), two passes; rms: m = 0 and
// the mean of squares (RMSNorm).
void row_mean_rstd(const float* x, int C, float inv_c, float eps, bool rms, float& m, float& s) {
  float sum = 0.0f;
  if (!rms) {
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; ++c) sum += x[c];
  }
  m = sum * inv_c;
  float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
  for (int c = 0; c < C; ++c) {
    float d = x[c] - m;
    sq += d * d;
  }
  s = 1.0f / std::sqrt(sq * inv_c + eps);
}
}  // namespace

void layernorm_forward_typed(void* out, StorageType to, float* mean, float* rstd, const float* inp,
                             const float* weight, const float* bias, int N, int C, float eps, bool rms,
                             std::int64_t groups, std::int64_t stride) {
  MPT_CHECK(N >= 0 && C > 0, "[layernorm_forward_typed] bad size: " + dims(N, C));
  const RowAt at = row_at(C, groups, stride);
  MPT_CHECK(eps >= 0.0f, "[layernorm_forward_typed] eps must be >= 0, got " + std::to_string(eps));
  const float inv_c = 1.0f / static_cast<float>(C);
  const size_t eo = storage_bytes(to);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + at(n);
    char* y = static_cast<char*>(out) + at(n) * eo;
    float m, s;
    row_mean_rstd(x, C, inv_c, eps, rms, m, s);
    float tmp[kChunk];
    for (int c0 = 0; c0 < C; c0 += static_cast<int>(kChunk)) {
      const int len = std::min(static_cast<int>(kChunk), C - c0);
      if (rms)
        for (int c = 0; c < len; ++c) tmp[c] = x[c0 + c] * s * weight[c0 + c];
      else
        for (int c = 0; c < len; ++c) tmp[c] = (x[c0 + c] - m) * s * weight[c0 + c] + bias[c0 + c];
      dispatch_storage(to, [&](auto t) { narrow_span(reinterpret_cast<decltype(t)*>(y) + c0, tmp, len); });
    }
    if (!rms) mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C, bool rms,
                        std::int64_t groups, std::int64_t stride, bool accumulate) {
  MPT_CHECK(N >= 0 && C > 0, "[layernorm_backward] bad size: " + dims(N, C));
  const RowAt at = row_at(C, groups, stride);
  if (N == 0) return;
  const int chunks = std::min(N, kChunks);
  const size_t cs = static_cast<size_t>(C);
  // partial[k] holds chunk k's dweight (first C floats) and dbias (next C floats).
  std::unique_ptr<float[]> partial(new float[static_cast<size_t>(chunks) * 2 * cs]);
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int k = 0; k < chunks; ++k) {
      float* pw = partial.get() + static_cast<size_t>(k) * 2 * cs;
      float* pb = pw + cs;
      std::fill(pw, pw + 2 * cs, 0.0f);
      const int n0 = static_cast<int>(static_cast<long long>(N) * k / chunks);
      const int n1 = static_cast<int>(static_cast<long long>(N) * (k + 1) / chunks);
      for (int n = n0; n < n1; ++n) {
        const float* x = inp + at(n);
        const float* dy = dout + at(n);
        float* dx = dinp + at(n);  // may be dy itself (!accumulate): each element read before written
        const float m = rms ? 0.0f : mean[n];
        const float s = rstd[n];
        float sum_g = 0.0f, sum_gn = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gn)
        for (int c = 0; c < C; ++c) {
          float g = weight[c] * dy[c];
          sum_g += g;
          sum_gn += g * (x[c] - m) * s;
        }
        const float mg = rms ? 0.0f : sum_g * inv_c;  // RMSNorm subtracts no mean
        const float mgn = sum_gn * inv_c;
#pragma omp simd  // pw and pb are distinct buffers; dx[c] depends on dy[c] alone
        for (int c = 0; c < C; ++c) {
          const float norm = (x[c] - m) * s, g = dy[c];
          pw[c] += g * norm;
          pb[c] += g;
          dx[c] = (accumulate ? dx[c] : 0.0f) + s * (weight[c] * g - mg - norm * mgn);
        }
      }
    }
    // (implicit barrier: every partial is complete) Sum the partials in chunk order, one strip
    // of channels per task so that the inner loop runs along contiguous memory.
    const int strips = (C + kStrip - 1) / kStrip;
#pragma omp for schedule(static)
    for (int st = 0; st < strips; ++st) {
      const int c0 = st * kStrip;
      const int width = std::min(kStrip, C - c0);
      float w[kStrip] = {}, b[kStrip] = {};
      for (int k = 0; k < chunks; ++k) {
        const float* pw = partial.get() + static_cast<size_t>(k) * 2 * cs + c0;
        const float* pb = pw + cs;
        for (int c = 0; c < width; ++c) {
          w[c] += pw[c];
          b[c] += pb[c];
        }
      }
      for (int c = 0; c < width; ++c) dweight[c0 + c] += w[c];
      if (!rms)
        for (int c = 0; c < width; ++c) dbias[c0 + c] += b[c];
    }
  }
}

}  // namespace mptrain::cpu
