// The vectorised AdamW against a scalar transcription of the exact fp32 operations it is
// specified to perform (src/optim/adamw.cpp: where the fma's are, division order), bit for bit,
// over lengths that leave vector and block tails, several steps, with and without decay, and
// for 1 and 2 threads (the update is elementwise, so the thread split cannot matter).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
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

// One masked update over a whole buffer has the bits of one update per range with that range's
// own weight decay (what the optimizers did per tensor before they launched once over the table):
// ranges that start and end inside mask words, vectors and OpenMP blocks, for AdamW (whose vector
// loop blends the decay factor per lane) and Sophia.
TEST(DecayMask, OneMaskedUpdateEqualsOneUpdatePerRange) {
  const size_t n = 5000;
  // [begin, end, decays]: a tensor layout with odd sizes.
  const struct Range {
    size_t begin, end;
    bool decay;
  } ranges[] = {{0, 7, false},       {7, 1100, true},    {1100, 1117, false}, {1117, 1133, true},
                {1133, 2048, false}, {2048, 4999, true}, {4999, 5000, false}};
  std::vector<std::uint32_t> mask((n + 31) / 32, 0u);
  for (const Range& r : ranges)
    if (r.decay)
      for (size_t i = r.begin; i < r.end; ++i) mask[i >> 5] |= 1u << (i & 31);
  std::vector<float> p(n), m(n, 0.0f), v(n, 0.0f), h(n);
  for (size_t i = 0; i < n; ++i) p[i] = normal01(21, 0, i), h[i] = std::fabs(normal01(22, 0, i));
  std::vector<float> pa = p, ma = m, va = v, ps = p, ms = m, pb = p, mb = m, vb = v, pt = p, mt = m;
  for (int t = 1; t <= 3; ++t) {
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = 0.01f * normal01(23, t, i);
    cpu::adamw_update(pa.data(), g.data(), ma.data(), va.data(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 0.5f,
                      mask.data());
    cpu::sophia_update(ps.data(), g.data(), ms.data(), h.data(), n, 3e-3f, 0.965f, 0.04f, 0.1f, 0.5f,
                       mask.data());
    for (const Range& r : ranges) {
      const size_t k = r.end - r.begin, o = r.begin;
      cpu::adamw_update(pb.data() + o, g.data() + o, mb.data() + o, vb.data() + o, k, 3e-3f, 0.9f, 0.95f,
                        1e-8f, r.decay ? 0.1f : 0.0f, t, 0.5f);
      cpu::sophia_update(pt.data() + o, g.data() + o, mt.data() + o, h.data() + o, k, 3e-3f, 0.965f, 0.04f,
                         r.decay ? 0.1f : 0.0f, 0.5f);
    }
  }
  EXPECT_EQ(std::memcmp(pa.data(), pb.data(), n * sizeof(float)), 0) << "AdamW params";
  EXPECT_EQ(std::memcmp(ma.data(), mb.data(), n * sizeof(float)), 0) << "AdamW m";
  EXPECT_EQ(std::memcmp(va.data(), vb.data(), n * sizeof(float)), 0) << "AdamW v";
  EXPECT_EQ(std::memcmp(ps.data(), pt.data(), n * sizeof(float)), 0) << "Sophia params";
  EXPECT_EQ(std::memcmp(ms.data(), mt.data(), n * sizeof(float)), 0) << "Sophia m";
  // And the mask matters: without it every element decays.
  std::vector<float> pc = p, mc = m, vc = v;
  std::vector<float> g(n, 0.0f);
  cpu::adamw_update(pc.data(), g.data(), mc.data(), vc.data(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f,
                    mask.data());
  EXPECT_EQ(pc[3], p[3]) << "a masked-out element decayed";
  EXPECT_NE(pc[8], p[8]) << "a masked-in element did not decay";
}

}  // namespace
}  // namespace mptrain
