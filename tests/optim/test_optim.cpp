// AdamW, the LR schedule and gradient-norm clipping against plain double-precision
// transcriptions of their definitions (PyTorch's AdamW and clip_grad_norm_).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "backend/ops/optimizer.h"
#include "common/cpu_fp32.h"
#include "common/host_backend.h"
#include "core/rng.h"
#include "optim/adamw.h"
#include "optim/schedule.h"

namespace mptrain {
namespace {

TEST(AdamW, MatchesPyTorchFormulaOverSeveralSteps) {
  const size_t n = 1037;  // not a multiple of any vector width
  std::vector<float> p(n), m(n, 0.0f), v(n, 0.0f);
  std::vector<double> pd(n), md(n, 0.0), vd(n, 0.0);
  for (size_t i = 0; i < n; ++i) pd[i] = p[i] = normal01(1, 0, i);
  const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  for (int t = 1; t <= 5; ++t) {
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = normal01(2, t, i);
    cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, t);
    for (size_t i = 0; i < n; ++i) {
      pd[i] *= 1.0 - double(lr) * wd;
      md[i] = b1 * md[i] + (1.0 - b1) * g[i];
      vd[i] = b2 * vd[i] + (1.0 - b2) * double(g[i]) * g[i];
      const double bc1 = 1.0 - std::pow(double(b1), t), bc2 = 1.0 - std::pow(double(b2), t);
      pd[i] -= lr / bc1 * md[i] / (std::sqrt(vd[i]) / std::sqrt(bc2) + eps);
    }
  }
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(p[i], pd[i], 1e-5 + 1e-5 * std::fabs(pd[i])) << i;
}

TEST(AdamW, DecayOnlyOnTensorsMarkedForIt) {
  ParamTable table;
  table.add("w", {2, 3}, InitRule::Normal, true);
  table.add("b", {3}, InitRule::Zeros, false);
  AdamW opt(table, AdamWHyper{0.9f, 0.95f, 1e-8f, 0.5f}, host_backend());
  std::vector<float> params(table.total(), 1.0f), grads(table.total(), 0.0f);
  opt.step(params.data(), grads.data(), 0.1f, 1);
  for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(params[i], 1.0f - 0.1f * 0.5f);  // decayed, zero gradient
  for (size_t i = 6; i < 9; ++i) EXPECT_FLOAT_EQ(params[i], 1.0f);                // not decayed
}

TEST(Schedule, WarmupThenCosineToFloor) {
  LrSchedule s{1.0f, 0.1f, 10, 110};
  EXPECT_FLOAT_EQ(s.at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.at(9), 1.0f);
  EXPECT_FLOAT_EQ(s.at(10), 1.0f);
  EXPECT_NEAR(s.at(60), 0.55f, 1e-6);  // halfway through the cosine
  EXPECT_NEAR(s.at(110), 0.1f, 1e-7);
  EXPECT_NEAR(s.at(500), 0.1f, 1e-7);
  for (int i = 11; i < 110; ++i) EXPECT_LE(s.at(i), s.at(i - 1));
}

TEST(GradNorm, NormAndClipMatchTorchRule) {
  const size_t n = 200003;
  std::vector<float> g(n);
  double ref = 0.0;
  for (size_t i = 0; i < n; ++i) {
    g[i] = normal01(3, 0, i);
    ref += double(g[i]) * g[i];
  }
  ref = std::sqrt(ref);
  const double norm = global_norm(g.data(), n);
  EXPECT_NEAR(norm, ref, 1e-9 * ref);
  std::vector<float> c = g;
  const float coef = clip_grad_norm(c.data(), n, norm, 1.0f);
  EXPECT_NEAR(coef, 1.0 / (ref + 1e-6), 1e-7);
  EXPECT_NEAR(global_norm(c.data(), n), 1.0, 1e-5);
  std::vector<float> u = g;
  EXPECT_EQ(clip_grad_norm(u.data(), n, norm, 1e9f), 1.0f);  // below the bound: untouched
  EXPECT_EQ(u, g);
}

// The norm's summation order is fixed by the code (blocks of 65536, 32 lanes inside a block), so
// the thread count cannot change its bits; sizes leave block and lane tails.
TEST(GradNorm, SameBitsForOneAndTwoThreads) {
  const int saved_threads = omp_get_max_threads();
  for (const size_t n : {size_t{31}, size_t{65536}, size_t{3 * 65536 + 17}}) {
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = normal01(4, 0, i);
    omp_set_num_threads(1);
    const double one = global_norm(g.data(), n);
    omp_set_num_threads(2);
    const double two = global_norm(g.data(), n);
    EXPECT_EQ(one, two) << "n=" << n;
    long double ref = 0.0L;
    for (float x : g) ref += static_cast<long double>(x) * x;
    EXPECT_NEAR(one, std::sqrt(static_cast<double>(ref)), 1e-12 * one) << "n=" << n;
  }
  omp_set_num_threads(saved_threads);
}

}  // namespace
}  // namespace mptrain
