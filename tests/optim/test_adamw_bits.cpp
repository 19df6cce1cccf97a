// The vectorised AdamW against a scalar transcription of the exact fp32 operations it is
// specified to perform (src/optim/adamw.cpp: where the fma's are, division order), bit for bit,
// over lengths that leave vector and block tails, several steps, with and without decay, and
// for 1 and 2 threads (the update is elementwise, so the thread split cannot matter).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/ops/optimizer.h"
#include "core/rng.h"
#include "optim/adamw.h"

namespace mptrain {
namespace {

void reference_step(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m,
                    std::vector<float>& v, float lr, float b1, float b2, float eps, float wd, int t) {
  const double bc1 = 1.0 - std::pow(double(b1), t), bc2 = 1.0 - std::pow(double(b2), t);
  const float step = static_cast<float>(lr / bc1), bc2s = static_cast<float>(std::sqrt(bc2));
  const float decay = 1.0f - lr * wd;
  for (size_t i = 0; i < p.size(); ++i) {
    m[i] = std::fma(b1, m[i], (1.0f - b1) * g[i]);
    v[i] = std::fma(b2, v[i], ((1.0f - b2) * g[i]) * g[i]);
    const float denom = std::sqrt(v[i]) / bc2s + eps;
    p[i] = std::fma(p[i], decay, -((step * m[i]) / denom));
  }
}

TEST(AdamW, BitIdenticalToTheSpecifiedScalarOperations) {
#if !defined(__AVX512F__)
  GTEST_SKIP() << "without AVX-512 the compiler chooses the contraction";
#endif
  const int saved_threads = omp_get_max_threads();
  for (const size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{1023}, size_t{1024}, size_t{4133}}) {
    for (const float wd : {0.0f, 0.1f}) {
      for (const int threads : {1, 2}) {
        omp_set_num_threads(threads);
        std::vector<float> p(n), m(n, 0.0f), v(n, 0.0f);
        for (size_t i = 0; i < n; ++i) p[i] = normal01(11, 0, i);
        std::vector<float> pr = p, mr = m, vr = v;
        for (int t = 1; t <= 4; ++t) {
          std::vector<float> g(n);
          for (size_t i = 0; i < n; ++i) g[i] = (t == 3 && i % 7 == 0) ? 0.0f : 0.01f * normal01(12, t, i);
          cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, wd, t);
          reference_step(pr, g, mr, vr, 3e-3f, 0.9f, 0.95f, 1e-8f, wd, t);
        }
        EXPECT_EQ(std::memcmp(p.data(), pr.data(), n * sizeof(float)), 0) << "params n=" << n << " wd=" << wd;
        EXPECT_EQ(std::memcmp(m.data(), mr.data(), n * sizeof(float)), 0) << "m n=" << n;
        EXPECT_EQ(std::memcmp(v.data(), vr.data(), n * sizeof(float)), 0) << "v n=" << n;
      }
    }
  }
  omp_set_num_threads(saved_threads);
}

}  // namespace
}  // namespace mptrain
