// Sophia-G on the GPU against its CPU twins: the fused update over a parameter table with
// decayed and non-decayed tensors (one launch, the AdamW decay mask); h = 0 (the step is
// lr·sign(m)); the clip bound for every coordinate; grad_scale; the Hessian EMA; the exact unclipped count.
// Then the sampled cross-entropy for every storage type: labels against
// cpu::crossentropy_sampled_forward_backward (equal except where the row's uniform lies at a CDF boundary,
// checked), never in the padding, losses and dlogits bit for bit the unsampled kernel's for targets = the
// drawn labels, reproducible for a fixed (seed, counter), different for another counter, in place, a
// non-finite row, and the label frequencies of a known softmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/backend.h"
#include "backend/cuda/adamw.h"
#include "backend/cuda/crossentropy.h"
#include "backend/cuda/sophia.h"
#include "backend/ops/crossentropy.h"
#include "backend/ops/optimizer.h"
#include "core/error.h"
#include "cuda/gpu_test_util.h"
#include "optim/sophia.h"

namespace mptrain {
namespace {

using namespace gputest;

// A parameter table of awkward sizes with alternating decay: mask words and float4 groups
// straddle tensor boundaries.
struct Table {
  std::vector<size_t> sizes = {33, 128, 31, 260, 1, 129, 1000};
  std::vector<std::pair<size_t, size_t>> ranges, decayed;
  size_t n = 0;
  Table() {
    for (size_t i = 0; i < sizes.size(); ++i) {
      ranges.push_back({n, n + sizes[i]});
      if (i % 2 == 0) decayed.push_back({n, n + sizes[i]});
      n += sizes[i];
    }
  }
  bool decays(size_t t) const { return t % 2 == 0; }
};

// Momentum, gradients and a Hessian EMA where about half the coordinates are clipped; every
// 7th h is 0 (clipped unless m = 0) and every 11th m and g are 0 (sign(0) = 0: no step).
struct State {
  std::vector<float> p, g, m, h;
  State(size_t n, uint64_t seed)
      : p(randn(n, seed)), g(randn(n, seed + 1, 0.1f)), m(randn(n, seed + 2, 0.01f)) {
    h = randn(n, seed + 3, 0.01f);
    for (size_t i = 0; i < n; ++i) {
      h[i] = i % 7 == 3 ? 0.0f : std::fabs(h[i]);
      if (i % 11 == 5) m[i] = g[i] = 0.0f;
    }
  }
};

void cpu_step(const Table& t, State& s, float lr, const SophiaHyper& hy, float rho_b, float weight_decay) {
  for (size_t k = 0; k < t.ranges.size(); ++k) {
    const size_t o = t.ranges[k].first;
    cpu::sophia_update(s.p.data() + o, s.g.data() + o, s.m.data() + o, s.h.data() + o, t.sizes[k], lr,
                       hy.beta1, rho_b, t.decays(k) ? weight_decay : 0.0f);
  }
}

// p·decay rounded once to fp32, whatever the host compiler contracts: the product of two
// floats is exact in double, so rounding it to float is the correctly rounded product.
float decayed_param(float p, float decay, bool decayed) {
  return decayed ? static_cast<float>(static_cast<double>(p) * decay) : p;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CudaSophia, MatchesCpuPerTensorUpdates) {
  SKIP_WITHOUT_GPU();
  const Table t;
  const SophiaHyper hy;
  const float rho_b = hy.rho * 64.0f, lr = 3e-3f, wd = 0.2f;
  State s(t.n, 1);
  cuda::DeviceBuffer<float> gp(s.p, ctx()), gg(s.g, ctx()), gm(s.m, ctx()), gh(s.h, ctx());
  cuda::DeviceBuffer<uint32_t> mask(decay_mask_bits(t.n, t.decayed), ctx());
  cuda::SophiaArgs a;
  a.lr = lr;
  a.beta1 = hy.beta1;
  a.rho_b = rho_b;
  a.weight_decay = wd;
  for (int step = 0; step < 3; ++step) {
    cuda::sophia_update(gp.data(), gg.data(), gm.data(), gh.data(), mask.data(), t.n, a, ctx());
    cpu_step(t, s, lr, hy, rho_b, wd);
  }
  const auto p = gp.download(ctx()), m = gm.download(ctx());
  EXPECT_LT(rel_err(p, s.p), 1e-6);
  EXPECT_LT(rel_err(m, s.m), 1e-6);
  EXPECT_TRUE(same_bits(gh.download(ctx()), s.h)) << "sophia_update wrote h";
  for (size_t i = 0; i < t.n; ++i) {
    if (i % 11 == 5) {
      ASSERT_EQ(m[i], 0.0f) << i;  // m = g = 0 stays 0 (and p only decays)
    }
  }
}

// h = 0: every coordinate with m ≠ 0 is clipped, so the step is exactly lr·sign(m) after the
// decay (one rounding each, as the CPU and PyTorch do); m = 0 coordinates only decay.
TEST(CudaSophia, ZeroHessianStepIsLrTimesSignOfM) {
  SKIP_WITHOUT_GPU();
  const Table t;
  State s(t.n, 5);
  std::fill(s.h.begin(), s.h.end(), 0.0f);
  cuda::DeviceBuffer<float> gp(s.p, ctx()), gg(s.g, ctx()), gm(s.m, ctx()), gh(s.h, ctx());
  cuda::DeviceBuffer<uint32_t> mask(decay_mask_bits(t.n, t.decayed), ctx());
  cuda::SophiaArgs a;
  a.lr = 1e-2f;
  a.rho_b = 2.56f;
  a.weight_decay = 0.1f;
  cuda::sophia_update(gp.data(), gg.data(), gm.data(), gh.data(), mask.data(), t.n, a, ctx());
  const auto p = gp.download(ctx()), m = gm.download(ctx());
  const float decay = static_cast<float>(1.0 - static_cast<double>(a.lr) * a.weight_decay);
  const auto bits = decay_mask_bits(t.n, t.decayed);
  int moved = 0;
  for (size_t i = 0; i < t.n; ++i) {
    const bool decayed = (bits[i >> 5] >> (i & 31)) & 1u;
    const float pd = decayed_param(s.p[i], decay, decayed);
    const float sign = m[i] > 0.0f ? 1.0f : (m[i] < 0.0f ? -1.0f : 0.0f);
    // pd − lr·sign is exact in double (|pd| ≲ 5, lr = 1e-2): one rounding, as on the GPU.
    const float want = static_cast<float>(static_cast<double>(pd) - static_cast<double>(a.lr) * sign);
    ASSERT_EQ(p[i], want) << i << " m=" << m[i];
    moved += sign != 0.0f;
  }
  EXPECT_GT(moved, static_cast<int>(t.n) * 8 / 10);
}

// |p_new − p·decay| ≤ lr for every coordinate (up to the rounding of the final add), for
// momenta far larger and far smaller than ρ·b·h; both kinds occur.
TEST(CudaSophia, ClipBoundHoldsForEveryCoordinate) {
  SKIP_WITHOUT_GPU();
  const Table t;
  State s(t.n, 9);
  for (size_t i = 0; i < t.n; ++i) s.g[i] *= (i % 3 == 0 ? 1000.0f : 1.0f);  // some huge momenta
  cuda::DeviceBuffer<float> gp(s.p, ctx()), gg(s.g, ctx()), gm(s.m, ctx()), gh(s.h, ctx());
  cuda::DeviceBuffer<uint32_t> mask(decay_mask_bits(t.n, t.decayed), ctx());
  cuda::SophiaArgs a;
  a.lr = 6e-4f;
  a.rho_b = 0.05f * 480.0f;
  a.weight_decay = 0.2f;
  cuda::sophia_update(gp.data(), gg.data(), gm.data(), gh.data(), mask.data(), t.n, a, ctx());
  const auto p = gp.download(ctx()), m = gm.download(ctx());
  const float decay = static_cast<float>(1.0 - static_cast<double>(a.lr) * a.weight_decay);
  const auto bits = decay_mask_bits(t.n, t.decayed);
  int clipped = 0, unclipped = 0;
  for (size_t i = 0; i < t.n; ++i) {
    const bool decayed = (bits[i >> 5] >> (i & 31)) & 1u;
    const float pd = decayed_param(s.p[i], decay, decayed);
    const double step = std::fabs(static_cast<double>(p[i]) - pd);
    // The final add rounds once: at most half an ulp of |p·decay| + lr.
    const float big = std::fabs(pd) + a.lr;
    const double ulp = static_cast<double>(std::nextafter(big, std::numeric_limits<float>::infinity())) - big;
    ASSERT_LE(step, a.lr + ulp) << i;
    if (std::fabs(m[i]) >= a.rho_b * s.h[i] && m[i] != 0.0f)
      ++clipped;
    else
      ++unclipped;
  }
  EXPECT_GT(clipped, 100);
  EXPECT_GT(unclipped, 100);
}

TEST(CudaSophia, GradScaleMultipliesEveryGradient) {
  SKIP_WITHOUT_GPU();
  const Table t;
  State s(t.n, 13);
  cuda::DeviceBuffer<float> gp(s.p, ctx()), gg(s.g, ctx()), gm(s.m, ctx()), gh(s.h, ctx());
  cuda::DeviceBuffer<uint32_t> mask(decay_mask_bits(t.n, t.decayed), ctx());
  const SophiaHyper hy;
  cuda::SophiaArgs a;
  a.lr = 1e-2f;
  a.rho_b = 2.56f;
  a.grad_scale = 0.25f;
  cuda::sophia_update(gp.data(), gg.data(), gm.data(), gh.data(), mask.data(), t.n, a, ctx());
  for (float& x : s.g) x *= 0.25f;
  cpu_step(t, s, a.lr, hy, a.rho_b, a.weight_decay);
  EXPECT_LT(rel_err(gp.download(ctx()), s.p), 1e-6);
  EXPECT_LT(rel_err(gm.download(ctx()), s.m), 1e-6);
}

TEST(CudaSophia, HessianUpdateMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (size_t n : {size_t{1}, size_t{3}, size_t{33}, size_t{1027}, (size_t{1} << 20) + 3}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> h = randn(n, 21, 0.01f), g = randn(n, 22, 0.1f);
    for (float& x : h) x = std::fabs(x);
    cuda::DeviceBuffer<float> gh(h, ctx()), gg(g, ctx());
    for (int k = 0; k < 2; ++k) {
      cuda::sophia_hessian_update(gh.data(), gg.data(), n, 0.99f, ctx());
      cpu::sophia_hessian_update(h.data(), g.data(), n, 0.99f);
    }
    EXPECT_LT(rel_err(gh.download(ctx()), h), 1e-6);
    EXPECT_TRUE(same_bits(gg.download(ctx()), g)) << "ghat was written";
  }
}

TEST(CudaSophia, UnclippedCountEqualsCpu) {
  SKIP_WITHOUT_GPU();
  const float rho_b = 2.56f;
  for (size_t n : {size_t{1}, size_t{33}, size_t{1027}, (size_t{1} << 20) + 3}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    State s(n, 31);
    cuda::DeviceBuffer<float> gm(s.m, ctx()), gh(s.h, ctx());
    cuda::DeviceBuffer<unsigned long long> count(1);
    count.poison(ctx());
    cuda::sophia_unclipped_count(count.data(), gm.data(), gh.data(), n, rho_b, ctx());
    const size_t want = cpu::sophia_unclipped_count(s.m.data(), s.h.data(), n, rho_b);
    EXPECT_EQ(count.download(ctx())[0], want);
    if (n > 2) {
      EXPECT_GT(want, 0u);
    }
    // An unaligned range.
    const size_t cut = n / 3;
    cuda::sophia_unclipped_count(count.data(), gm.data() + cut, gh.data() + cut, n - cut, rho_b, ctx());
    EXPECT_EQ(count.download(ctx())[0],
              cpu::sophia_unclipped_count(s.m.data() + cut, s.h.data() + cut, n - cut, rho_b));
  }
  // n = 0 writes 0.
  cuda::DeviceBuffer<unsigned long long> count(1);
  count.poison(ctx());
  cuda::sophia_unclipped_count(count.data(), nullptr, nullptr, 0, rho_b, ctx());
  EXPECT_EQ(count.download(ctx())[0], 0u);
}

TEST(CudaSophia, BadArgumentsAreClearErrors) {
  SKIP_WITHOUT_GPU();
  const size_t n = 8;
  cuda::DeviceBuffer<float> buf(4 * n);
  cuda::DeviceBuffer<uint32_t> mask(decay_mask_bits(n, {}), ctx());
  float* p = buf.data();
  cuda::SophiaArgs a;
  a.lr = 1e-3f;
  a.rho_b = 0.0f;  // ρ·b must be positive
  EXPECT_THROW(cuda::sophia_update(p, p + n, p + 2 * n, p + 3 * n, mask.data(), n, a, ctx()), Error);
  a.rho_b = 1.0f;
  EXPECT_THROW(cuda::sophia_update(p + 1, p + n, p + 2 * n, p + 3 * n, mask.data(), n - 1, a, ctx()), Error)
      << "unaligned params";
  EXPECT_THROW(cuda::sophia_hessian_update(p, p + n, n, 1.0f, ctx()), Error) << "beta2 = 1";
  EXPECT_THROW(cuda::sophia_unclipped_count(nullptr, p, p + n, n, 1.0f, ctx()), Error);
}

// ---- sampled cross-entropy -------------------------------------------------------------

template <class T>
class CudaSampledCrossEntropy : public ::testing::Test {};
TYPED_TEST_SUITE(CudaSampledCrossEntropy, StorageTypes);

struct Case {
  int N, V, Vp;
};
// Packed and unpacked paths (Vp % 8, Vp % 4), partial last packs (V % 8 ≠ 0), one and
// several 512-column sum blocks, GPT-2's vocabulary.
const Case kCases[] = {{37, 1, 1},      {33, 31, 32},    {16, 129, 136},  {19, 260, 261},     {8, 513, 520},
                       {7, 1027, 1032}, {6, 1100, 1104}, {5, 5000, 5056}, {256, 50257, 50304}};

template <class T>
bool same_raw(const cuda::DeviceBuffer<T>& a, const cuda::DeviceBuffer<T>& b) {
  const auto x = a.download(ctx()), y = b.download(ctx());
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

// Where the CPU and the GPU drew different labels a < b, the row's uniform must lie at the
// CDF boundary between them: F(b−1) − eps ≤ u ≤ F(a) + eps (exact CDF in double), i.e. the
// columns between carry no mass and u sits where fp32 rounding can move it across.
bool at_cdf_boundary(const float* z, int V, int a, int b, double u, double eps) {
  if (a > b) std::swap(a, b);
  double mx = z[0];
  for (int j = 1; j < V; ++j) mx = std::max(mx, static_cast<double>(z[j]));
  std::vector<double> cum(static_cast<size_t>(V));
  double s = 0.0;
  for (int j = 0; j < V; ++j) cum[j] = s += std::exp(static_cast<double>(z[j]) - mx);
  const double f_a = cum[a] / s, f_b1 = cum[b - 1] / s;
  return u >= f_b1 - eps && u <= f_a + eps;
}

TYPED_TEST(CudaSampledCrossEntropy, MatchesCpuLabelsAndUnsampledKernel) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const uint64_t seed = 1234, counter = 7;
  for (const Case& k : kCases) {
    SCOPED_TRACE("N=" + std::to_string(k.N) + " V=" + std::to_string(k.V) + " Vp=" + std::to_string(k.Vp) +
                 " " + type_name<T>());
    const size_t NV = static_cast<size_t>(k.N) * k.Vp;
    std::vector<float> logits = randn(NV, 41, 2.0f);
    for (int n = 0; n < k.N; ++n)
      for (int j = k.V; j < k.Vp; ++j)
        logits[static_cast<size_t>(n) * k.Vp + j] = 1000.0f;  // must never count
    logits = rounded<T>(logits);
    std::vector<float> dloss(k.N);
    for (int n = 0; n < k.N; ++n) dloss[n] = 1.0f / k.N * (1.0f + 0.1f * n);
    auto gl = upload<T>(logits);
    cuda::DeviceBuffer<float> gdl(dloss, ctx());
    auto losses = poisoned<float>(k.N);
    auto dlogits = poisoned<T>(NV);
    auto labels = poisoned<int>(k.N);
    cuda::crossentropy_sampled_forward_backward(losses.data(), dlogits.data(), labels.data(), gl.data(),
                                                gdl.data(), k.N, k.V, k.Vp, seed, counter, ctx());
    const std::vector<int> got = labels.download(ctx());
    for (int n = 0; n < k.N; ++n)
      ASSERT_TRUE(got[n] >= 0 && got[n] < k.V) << "row " << n << " label " << got[n];

    // The CPU draws the same labels, except at CDF boundaries.
    std::vector<float> closs(k.N), cd(NV);
    std::vector<int> clabels(k.N);
    cpu::crossentropy_sampled_forward_backward(closs.data(), cd.data(), clabels.data(), logits.data(),
                                               dloss.data(), k.N, k.V, k.Vp, seed, counter);
    int differ = 0;
    std::vector<float> gl_agree, cl_agree;
    const std::vector<float> gloss = download(losses);
    for (int n = 0; n < k.N; ++n) {
      if (got[n] == clabels[n]) {
        gl_agree.push_back(gloss[n]);
        cl_agree.push_back(closs[n]);
        continue;
      }
      ++differ;
      const double u = label_uniform(seed, counter, static_cast<uint64_t>(n));
      EXPECT_TRUE(
          at_cdf_boundary(logits.data() + static_cast<size_t>(n) * k.Vp, k.V, got[n], clabels[n], u, 1e-5))
          << "row " << n << ": GPU label " << got[n] << ", CPU label " << clabels[n] << ", u = " << u
          << " is not at a CDF boundary between them";
    }
    EXPECT_LE(differ, 1 + k.N / 100) << "labels agree in fewer than 99% of the rows";
    EXPECT_LT(rel_err(gl_agree, cl_agree), 1e-5) << "losses of the rows whose labels agree";

    // Loss and gradient: bit for bit the unsampled kernel's for targets = the drawn labels,
    // and the CPU op's (same tolerances as the unsampled test).
    cuda::DeviceBuffer<int> gt(got, ctx());
    auto ulosses = poisoned<float>(k.N);
    auto udl = poisoned<T>(NV);
    cuda::crossentropy_forward_backward(ulosses.data(), udl.data(), gl.data(), gt.data(), gdl.data(), k.N,
                                        k.V, k.Vp, ctx());
    EXPECT_TRUE(same_raw(losses, ulosses)) << "losses differ from the unsampled kernel's";
    EXPECT_TRUE(same_raw(dlogits, udl)) << "dlogits differ from the unsampled kernel's";
    std::vector<float> rloss(k.N), rd(NV);
    cpu::crossentropy_forward_backward(rloss.data(), rd.data(), logits.data(), got.data(), dloss.data(), k.N,
                                       k.V, k.Vp);
    EXPECT_LT(rel_err(gloss, rloss), 1e-5);
    const auto gd = download(dlogits);
    EXPECT_LT(rel_err(gd, rd), tolerance<T>());
    for (int n = 0; n < k.N; ++n)
      for (int j = k.V; j < k.Vp; ++j)
        ASSERT_EQ(gd[static_cast<size_t>(n) * k.Vp + j], 0.0f) << "padded column";

    // Reproducible for (seed, counter); in place (dlogits aliasing logits) gives the same.
    auto labels2 = poisoned<int>(k.N);
    auto losses2 = poisoned<float>(k.N);
    auto inplace = upload<T>(logits);
    cuda::crossentropy_sampled_forward_backward(losses2.data(), inplace.data(), labels2.data(),
                                                inplace.data(), gdl.data(), k.N, k.V, k.Vp, seed, counter,
                                                ctx());
    EXPECT_TRUE(same_raw(labels, labels2)) << "not reproducible (or in place differs)";
    EXPECT_TRUE(same_raw(losses, losses2));
    EXPECT_TRUE(same_raw(dlogits, inplace)) << "in-place dlogits differ";

    // Another counter (the next Hessian estimate) draws other labels.
    if (k.V > 1) {
      cuda::crossentropy_sampled_forward_backward(losses2.data(), dlogits.data(), labels2.data(), gl.data(),
                                                  gdl.data(), k.N, k.V, k.Vp, seed, counter + 1, ctx());
      const std::vector<int> next = labels2.download(ctx());
      int moved = 0;
      for (int n = 0; n < k.N; ++n) moved += next[n] != got[n];
      EXPECT_GT(moved, 0) << "counter + 1 drew the same labels in every row";
    }
  }
}

// A row with a NaN logit cannot be sampled: label -1, loss NaN, NaN gradient; the other rows
// are unaffected (each row's uniform depends only on its index).
TEST(CudaSampledCrossEntropyRows, NonFiniteRowIsFlaggedOthersUnchanged) {
  SKIP_WITHOUT_GPU();
  const int N = 3, V = 100, Vp = 104;
  std::vector<float> logits = randn(static_cast<size_t>(N) * Vp, 3);
  cuda::DeviceBuffer<float> gl(logits, ctx()), gdl(std::vector<float>(N, 1.0f), ctx());
  auto losses = poisoned<float>(N), dl = poisoned<float>(static_cast<size_t>(N) * Vp);
  auto labels = poisoned<int>(N);
  cuda::crossentropy_sampled_forward_backward(losses.data(), dl.data(), labels.data(), gl.data(), gdl.data(),
                                              N, V, Vp, 5, 0, ctx());
  const std::vector<int> good = labels.download(ctx());
  logits[Vp + 17] = NAN;
  gl.upload(logits, ctx());
  cuda::crossentropy_sampled_forward_backward(losses.data(), dl.data(), labels.data(), gl.data(), gdl.data(),
                                              N, V, Vp, 5, 0, ctx());
  const std::vector<int> got = labels.download(ctx());
  const std::vector<float> l = losses.download(ctx()), d = dl.download(ctx());
  EXPECT_EQ(got[0], good[0]);
  EXPECT_EQ(got[2], good[2]);
  EXPECT_EQ(got[1], -1);
  EXPECT_TRUE(std::isnan(l[1]));
  EXPECT_TRUE(std::isfinite(l[0]) && std::isfinite(l[2]));
  for (int j = 0; j < Vp; ++j) ASSERT_TRUE(std::isnan(d[Vp + j])) << j;
}

// Labels follow the softmax: 20000 rows of the same logits, each label's frequency within 5
// standard deviations of its probability; the padded column (huge logit) is never drawn.
TEST(CudaSampledCrossEntropyRows, FrequenciesFollowTheSoftmax) {
  SKIP_WITHOUT_GPU();
  const int N = 20000, V = 5, Vp = 8;
  const float row[Vp] = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f, 50.0f, 50.0f, 50.0f};
  std::vector<float> logits(static_cast<size_t>(N) * Vp);
  for (int n = 0; n < N; ++n) std::copy(row, row + Vp, logits.begin() + static_cast<size_t>(n) * Vp);
  cuda::DeviceBuffer<float> gl(logits, ctx()), gdl(std::vector<float>(N, 1.0f / N), ctx());
  auto losses = poisoned<float>(N), dl = poisoned<float>(static_cast<size_t>(N) * Vp);
  auto labels = poisoned<int>(N);
  cuda::crossentropy_sampled_forward_backward(losses.data(), dl.data(), labels.data(), gl.data(), gdl.data(),
                                              N, V, Vp, 99, 3, ctx());
  std::vector<int> hist(V, 0);
  for (int lab : labels.download(ctx())) {
    ASSERT_TRUE(lab >= 0 && lab < V) << lab;
    ++hist[lab];
  }
  double s = 0.0;
  for (int j = 0; j < V; ++j) s += std::exp(static_cast<double>(row[j]));
  for (int j = 0; j < V; ++j) {
    const double p = std::exp(static_cast<double>(row[j])) / s;
    EXPECT_NEAR(hist[j] / static_cast<double>(N), p, 5.0 * std::sqrt(p * (1.0 - p) / N)) << "label " << j;
  }
}

TEST(CudaSampledCrossEntropyRows, BadSizesAndNullPointersAreClearErrors) {
  SKIP_WITHOUT_GPU();
  cuda::DeviceBuffer<float> buf(64), dl(4);
  cuda::DeviceBuffer<int> labels(4);
  EXPECT_THROW(cuda::crossentropy_sampled_forward_backward<float>(
                   dl.data(), buf.data(), labels.data(), buf.data(), dl.data(), 4, 17, 16, 0, 0, ctx()),
               Error);
  EXPECT_THROW(cuda::crossentropy_sampled_forward_backward<float>(dl.data(), buf.data(), nullptr, buf.data(),
                                                                  dl.data(), 4, 16, 16, 0, 0, ctx()),
               Error);
}

}  // namespace
}  // namespace mptrain
