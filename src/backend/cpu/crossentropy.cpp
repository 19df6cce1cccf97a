// Fused softmax + cross-entropy over a padded vocabulary, and the sampling softmax.
// Each row is independent (parallel over rows, no cross-row reduction). Per row:
//   m = max(z[:V]);  e_j = exp(z_j - m);  S = Σ e_j;  loss = m + log S - z[target]
//   dlogits_j = dloss·(e_j/S - [j == target]),  0 on the padded columns V..Vp-1.
// The exps are written straight into dlogits (which may be the logits buffer itself: each
// element is read before it is overwritten, and z[target] is read first of all).
// The typed variant (16-bit dlogits for the mixed-precision LM head) keeps the exps in a
// per-thread fp32 row that stays in L2 and writes each gradient once, rounded: the same values
// as the fp32 op followed by a conversion, without the fp32 dlogits round trip through memory
// (at GPT-2 124M, B4×T256 that was 206 MB written, read back and re-written as 103 MB).
#include "backend/ops/crossentropy.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/lowp.h"
#include "backend/cpu/vec_math.h"
#include "core/error.h"
#include "core/rng.h"

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

// e[j] = exp((z[j] - m)·scale) for j < V, returning their sum: fp32 within blocks of kSumBlock,
// the block sums added in double, in order. The loss and its 16-bit-gradient twin share it (scale
// 1, exact: x·1 = x), so their exps and sums agree bit for bit; the softmax passes 1/temperature.
inline double exp_shifted_sum(float* e, const float* z, int V, float m, float scale = 1.0f) {
  double sum = 0.0;
  for (int j0 = 0; j0 < V; j0 += kSumBlock) {
    const int j1 = std::min(V, j0 + kSumBlock);
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int j = j0; j < j1; ++j) {
      float ej = vexp((z[j] - m) * scale);
      e[j] = ej;
      s += ej;
    }
    sum += s;
  }
  return sum;
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
      sum = exp_shifted_sum(dz, z, V, m);
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

void crossentropy_forward_backward_typed(float* losses, void* dlogits, StorageType td, const float* logits,
                                         const int* targets, const float* dloss, int N, int V, int Vp) {
  if (td == StorageType::F32) {
    crossentropy_forward_backward(losses, static_cast<float*>(dlogits), logits, targets, dloss, N, V, Vp);
    return;
  }
  MPT_CHECK(N >= 0 && V > 0 && Vp >= V, "[crossentropy_typed] bad size: " + dims(N, V, Vp));
  MPT_CHECK(losses && dlogits && logits && targets && dloss,
            "[crossentropy_typed] null pointer (every buffer is required): " + dims(N, V, Vp));
  MPT_CHECK(static_cast<const void*>(logits) != dlogits,
            "[crossentropy_typed] a 16-bit dlogits cannot alias the fp32 logits: " + dims(N, V, Vp));
  for (int n = 0; n < N; ++n) {
    MPT_CHECK(targets[n] >= -1 && targets[n] < V, "[crossentropy_typed] target " + std::to_string(targets[n]) +
                                                      " at row " + std::to_string(n) +
                                                      " outside [-1, V): " + dims(N, V, Vp));
  }
  const size_t ed = storage_bytes(td);
#pragma omp parallel
  {
    std::vector<float> e_row(static_cast<size_t>(V));  // this thread's exps, one row at a time
    float* e = e_row.data();
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) {
      const float* z = logits + static_cast<size_t>(n) * Vp;
      char* dz = static_cast<char*>(dlogits) + static_cast<size_t>(n) * Vp * ed;
      const int target = targets[n];
      float scale = 0.0f, g = 0.0f;
      if (target < 0) {  // ignored position: no loss, no gradient (e stays unused)
        losses[n] = 0.0f;
      } else {
        // Exactly crossentropy_forward_backward's arithmetic, into e instead of dlogits.
        const float zt = z[target];
        const float m = row_max(z, V);
        const double sum = exp_shifted_sum(e, z, V, m);
        losses[n] = static_cast<float>(m + std::log(sum) - zt);
        g = dloss[n];
        scale = static_cast<float>(g / sum);
      }
      // dz[j] = round(e_j·scale), the target's round(e_t·scale - g); zeros on the padding and
      // on ignored rows.
      dispatch_storage(td, [&](auto tag) {
        using D = decltype(tag);
        D* d = reinterpret_cast<D*>(dz);
        float tmp[kChunk];
        for (int j0 = 0; j0 < Vp; j0 += static_cast<int>(kChunk)) {
          const int len = std::min(static_cast<int>(kChunk), Vp - j0);
          const int live = target < 0 ? 0 : std::clamp(V - j0, 0, len);
#pragma omp simd
          for (int j = 0; j < live; ++j) tmp[j] = e[j0 + j] * scale;
          for (int j = live; j < len; ++j) tmp[j] = 0.0f;
          if (target >= j0 && target < j0 + len) tmp[target - j0] -= g;
          narrow_span(d + j0, tmp, static_cast<size_t>(len));
        }
      });
    }
  }
}

// Per row, the same arithmetic as crossentropy_forward_backward (max, blocked exp sums, scale)
// with one addition: the block sums are kept, and the label is found by inverse CDF (u is
// core/rng.h's label_uniform, which the GPU kernel shares) — first the block where the
// running sum passes u·S (the same double additions that made S, so some block always does),
// then the column inside that block (at most kSumBlock exps that are still in cache). The
// loss is log S − log e_label, since e_label = exp(z_label − max) is all that remains of the
// logit once dlogits aliases logits.
void crossentropy_sampled_forward_backward(float* losses, float* dlogits, int* sampled, const float* logits,
                                           const float* dloss, int N, int V, int Vp, uint64_t seed,
                                           uint64_t counter) {
  MPT_CHECK(N >= 0 && V > 0 && Vp >= V, "[crossentropy_sampled] bad size: " + dims(N, V, Vp));
  MPT_CHECK(losses && dlogits && sampled && logits && dloss,
            "[crossentropy_sampled] null pointer (every buffer is required): " + dims(N, V, Vp));
  const int blocks = (V + kSumBlock - 1) / kSumBlock;
  int bad_row = -1;  // a row whose logits are not finite (no label can be drawn)
#pragma omp parallel
  {
    std::vector<double> block_sums(static_cast<size_t>(blocks));
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) {
      const float* z = logits + static_cast<size_t>(n) * Vp;
      float* dz = dlogits + static_cast<size_t>(n) * Vp;
      const float m = row_max(z, V);
      double sum = 0.0;
      for (int b = 0; b < blocks; ++b) {
        const int j0 = b * kSumBlock, j1 = std::min(V, j0 + kSumBlock);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int j = j0; j < j1; ++j) {
          float e = vexp(z[j] - m);
          dz[j] = e;
          s += e;
        }
        block_sums[b] = s;
        sum += s;
      }
      const double target = label_uniform(seed, counter, static_cast<uint64_t>(n)) * sum;
      double before = 0.0;
      int b = 0;
      for (; b < blocks - 1 && before + block_sums[b] <= target; ++b) before += block_sums[b];
      // Inside the block: the first column where the running sum passes the rest of the target;
      // if fp rounding leaves it just short, the block's last column with mass.
      const int j0 = b * kSumBlock, j1 = std::min(V, j0 + kSumBlock);
      const double rest = target - before;
      double cum = 0.0;
      int label = -1;
      for (int j = j0; j < j1; ++j) {
        if (dz[j] > 0.0f) {
          label = j;
          cum += dz[j];
          if (cum > rest) break;
        }
      }
      if (label < 0 || !std::isfinite(sum)) {
#pragma omp critical(crossentropy_sampled_bad_row)
        bad_row = bad_row < 0 ? n : std::min(bad_row, n);
        sampled[n] = 0;
        continue;
      }
      sampled[n] = label;
      losses[n] = static_cast<float>(std::log(sum) - std::log(static_cast<double>(dz[label])));
      const float g = dloss[n];
      const float scale = static_cast<float>(g / sum);
      for (int j = 0; j < V; ++j) dz[j] *= scale;
      dz[label] -= g;
      for (int j = V; j < Vp; ++j) dz[j] = 0.0f;
    }
  }
  MPT_CHECK(bad_row < 0, "[crossentropy_sampled] row " + std::to_string(bad_row) +
                             " has non-finite logits: no label can be sampled: " + dims(N, V, Vp));
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
    const double sum = exp_shifted_sum(p, z, V, m, inv_t);
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int j = 0; j < V; ++j) p[j] *= inv_sum;
    for (int j = V; j < Vp; ++j) p[j] = 0.0f;
  }
}

}  // namespace mptrain::cpu
