// Fused softmax + cross-entropy over a padded vocabulary, and the sampling softmax.
// Each row is independent (parallel over rows, no cross-row reduction). Per row:
//   m = max(z[:V]);  e_j = exp(z_j - m);  S = Σ e_j;  loss = m + log S - z[target]
//   dlogits_j = dloss·(e_j/S - [j == target]),  0 on the padded columns V..Vp-1.
// The exps are written straight into dlogits (which may be the logits buffer itself: each
// element is read before it is overwritten, and z[target] is read first of all).
#include "backend/ops/crossentropy.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/vec_math.h"
#include "core/error.h"

namespace mptrain::cpu {

namespace {

std::string dims(int N, int V, int Vp) {
  return "N=" + std::to_string(N) + " V=" + std::to_string(V) + " Vp=" + std::to_string(Vp);
}

// Row sums run in blocks: fp32 SIMD partial sums inside a block (fast), blocks added in double,
// so a 50k-column row sums to about fp32 rounding of the result.
constexpr int kSumBlock = 512;

inline float row_max(const float* z, int V) {
  float m = z[0];
#pragma omp simd reduction(max : m)
  for (int j = 1; j < V; ++j) m = z[j] > m ? z[j] : m;
  return m;
}

}  // namespace

void crossentropy_forward_backward(float* losses, float* dlogits, const float* logits, const int* targets,
                                   const float* dloss, int N, int V, int Vp) {
  MPT_CHECK(N >= 0 && V > 0 && Vp >= V, "[crossentropy] bad size: " + dims(N, V, Vp));
  MPT_CHECK(losses && logits && targets, "[crossentropy] null pointer: " + dims(N, V, Vp));
  MPT_CHECK(dlogits == nullptr || dloss != nullptr,
            "[crossentropy] dloss is required when dlogits is requested: " + dims(N, V, Vp));
  for (int n = 0; n < N; ++n) {
    MPT_CHECK(targets[n] >= -1 && targets[n] < V, "[crossentropy] target " + std::to_string(targets[n]) +
                                                      " at row " + std::to_string(n) +
                                                      " outside [-1, V): " + dims(N, V, Vp));
  }
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* z = logits + static_cast<size_t>(n) * Vp;
    float* dz = dlogits ? dlogits + static_cast<size_t>(n) * Vp : nullptr;
    const int target = targets[n];
    if (target < 0) {  // ignored position: no loss, no gradient
      losses[n] = 0.0f;
      if (dz)
        for (int j = 0; j < Vp; ++j) dz[j] = 0.0f;
      continue;
    }
    const float zt = z[target];
    const float m = row_max(z, V);
    double sum = 0.0;
    if (dz) {
      for (int j0 = 0; j0 < V; j0 += kSumBlock) {
        const int j1 = std::min(V, j0 + kSumBlock);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int j = j0; j < j1; ++j) {
          float e = vexp(z[j] - m);
          dz[j] = e;
          s += e;
        }
        sum += s;
      }
    } else {
      for (int j0 = 0; j0 < V; j0 += kSumBlock) {
        const int j1 = std::min(V, j0 + kSumBlock);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int j = j0; j < j1; ++j) s += vexp(z[j] - m);
        sum += s;
      }
    }
    losses[n] = static_cast<float>(m + std::log(sum) - zt);
    if (dz) {
      const float g = dloss[n];
      const float scale = static_cast<float>(g / sum);
      for (int j = 0; j < V; ++j) dz[j] *= scale;
      dz[target] -= g;
      for (int j = V; j < Vp; ++j) dz[j] = 0.0f;
    }
  }
}

void softmax_forward(float* probs, const float* logits, int N, int V, int Vp, float temperature) {
  MPT_CHECK(N >= 0 && V > 0 && Vp >= V, "[softmax_forward] bad size: " + dims(N, V, Vp));
  MPT_CHECK(temperature > 0.0f,
            "[softmax_forward] temperature must be > 0, got " + std::to_string(temperature));
  const float inv_t = 1.0f / temperature;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* z = logits + static_cast<size_t>(n) * Vp;
    float* p = probs + static_cast<size_t>(n) * Vp;
    // max(z)/T == max(z/T) for T > 0, so the shift is taken before scaling.
    const float m = row_max(z, V);
    double sum = 0.0;
    for (int j0 = 0; j0 < V; j0 += kSumBlock) {
      const int j1 = std::min(V, j0 + kSumBlock);
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int j = j0; j < j1; ++j) {
        float e = vexp((z[j] - m) * inv_t);
        p[j] = e;
        s += e;
      }
      sum += s;
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int j = 0; j < V; ++j) p[j] *= inv_sum;
    for (int j = V; j < Vp; ++j) p[j] = 0.0f;
  }
}

}  // namespace mptrain::cpu
