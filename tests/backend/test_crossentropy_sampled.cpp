// The fused softmax-cross-entropy with labels sampled from the softmax (Sophia's
// Gauss-Newton-Bartlett pass): the labels follow the softmax (chi-square over many draws,
// vocabularies inside one sum block and across several), padded columns are never drawn
// (even when they hold huge values or NaN), the gradient and loss equal those of the fixed-
// target op for targets = the sampled labels (separate and in-place dlogits), the labels
// depend only on (seed, counter, row) — not on the thread count — and bad input is rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/ops/crossentropy.h"
#include "core/error.h"
#include "op_test_util.h"

namespace mptrain::cpu {
namespace {

using test::all_close;
using test::Guarded;

struct Case {
  int N, V, Vp;
  float spread;
};
// Vocabularies below, at and across the 512-column sum blocks, and GPT-2's padded 50257.
const Case kCases[] = {{3, 1, 1, 1.0f},     {4, 5, 8, 2.0f},        {7, 33, 64, 3.0f}, {5, 512, 512, 2.0f},
                       {6, 1000, 1024, 4.0f}, {4, 1537, 1600, 2.0f}, {3, 50257, 50304, 2.0f}};

std::vector<float> make_logits(const Case& c, uint64_t seed, float padding) {
  std::vector<float> z = test::randn(static_cast<size_t>(c.N) * c.Vp, seed, c.spread);
  for (int n = 0; n < c.N; ++n)
    for (int j = c.V; j < c.Vp; ++j) z[static_cast<size_t>(n) * c.Vp + j] = padding;
  return z;
}

std::string name(const Case& c) {
  return " N=" + std::to_string(c.N) + " V=" + std::to_string(c.V) + " Vp=" + std::to_string(c.Vp);
}

TEST(CrossEntropySampled, GradientAndLossEqualFixedTargetsOnTheSampledLabels) {
  uint64_t seed = 400;
  for (const Case& c : kCases) {
    for (bool in_place : {false, true}) {
      const std::vector<float> logits = make_logits(c, ++seed, test::kPoison);  // padding never read
      const std::vector<float> dloss = test::uniform(c.N, seed + 1, 0.1f, 1.0f);
      Guarded loss(c.N), grad(in_place ? Guarded(logits) : Guarded(logits.size()));
      std::vector<int> labels(c.N, -7);
      crossentropy_sampled_forward_backward(loss.data(), grad.data(), labels.data(),
                                            in_place ? grad.data() : logits.data(), dloss.data(), c.N, c.V, c.Vp,
                                            seed, 3);
      for (int n = 0; n < c.N; ++n) ASSERT_TRUE(labels[n] >= 0 && labels[n] < c.V) << labels[n] << name(c);

      Guarded ref_loss(c.N), ref_grad(logits.size());
      crossentropy_forward_backward(ref_loss.data(), ref_grad.data(), logits.data(), labels.data(), dloss.data(), c.N,
                                    c.V, c.Vp);
      // Same arithmetic as the fixed-target op, so the gradient agrees to the last bits; the
      // loss is computed as log S − log e_label instead of max + log S − z_label.
      const std::string what = std::string(in_place ? "in place" : "separate") + name(c);
      EXPECT_TRUE(all_close(grad.values(), test::to_double(ref_grad.values()), {1e-9, 1e-6}, "dlogits " + what));
      EXPECT_TRUE(all_close(loss.values(), test::to_double(ref_loss.values()), {1e-6, 1e-6}, "loss " + what));
      for (int n = 0; n < c.N; ++n)
        for (int j = c.V; j < c.Vp; ++j)
          ASSERT_EQ(grad[static_cast<size_t>(n) * c.Vp + j], 0.0f) << "padded column " << j << what;
      EXPECT_TRUE(loss.guards_intact() && grad.guards_intact()) << what;
    }
  }
}

// Draws `rounds` × N labels (N identical rows of one logit vector, a new counter per round).
std::vector<long> draw_counts(const std::vector<float>& row, int V, int Vp, int N, int rounds, uint64_t seed) {
  std::vector<float> logits(static_cast<size_t>(N) * Vp), dlogits(logits.size()), loss(N);
  for (int n = 0; n < N; ++n) std::copy(row.begin(), row.end(), logits.begin() + static_cast<size_t>(n) * Vp);
  const std::vector<float> dloss(N, 1.0f / N);
  std::vector<int> labels(N);
  std::vector<long> counts(Vp, 0);
  for (int r = 0; r < rounds; ++r) {
    crossentropy_sampled_forward_backward(loss.data(), dlogits.data(), labels.data(), logits.data(), dloss.data(), N,
                                          V, Vp, seed, static_cast<uint64_t>(r));
    for (int l : labels) ++counts[l];
  }
  return counts;
}

std::vector<double> softmax64(const std::vector<float>& row, int V) {
  double m = row[0], s = 0.0;
  for (int j = 0; j < V; ++j) m = std::max(m, static_cast<double>(row[j]));
  std::vector<double> p(V);
  for (int j = 0; j < V; ++j) s += p[j] = std::exp(row[j] - m);
  for (double& x : p) x /= s;
  return p;
}

// Pearson's chi-square of counts against probabilities p, pooled into bins of `width` columns.
double chi_square(const std::vector<long>& counts, const std::vector<double>& p, int width, int* dof) {
  long total = 0;
  for (size_t j = 0; j < p.size(); ++j) total += counts[j];
  double chi2 = 0.0;
  int bins = 0;
  for (size_t j0 = 0; j0 < p.size(); j0 += width) {
    double expect = 0.0, seen = 0.0;
    for (size_t j = j0; j < std::min(p.size(), j0 + width); ++j) {
      expect += p[j] * total;
      seen += counts[j];
    }
    chi2 += (seen - expect) * (seen - expect) / expect;
    ++bins;
  }
  *dof = bins - 1;
  return chi2;
}

TEST(CrossEntropySampled, LabelsFollowTheSoftmax) {
  struct Dist {
    int V, Vp, width;  // width: columns pooled per chi-square bin (expected counts well above 5)
    float spread, padding;
  };
  // Small vocabulary (one block); three blocks and a partial one with a large finite value in
  // the padding, which would dominate every draw if it were read.
  for (const Dist& d : {Dist{7, 8, 1, 1.0f, 1e4f}, Dist{1537, 1600, 40, 1.5f, 1e4f}}) {
    std::vector<float> row = test::randn(d.Vp, 77 + d.V, d.spread);
    for (int j = d.V; j < d.Vp; ++j) row[j] = d.padding;
    const int N = 1000, rounds = d.V < 100 ? 100 : 200;
    const std::vector<long> counts = draw_counts(row, d.V, d.Vp, N, rounds, 11);
    for (int j = d.V; j < d.Vp; ++j) ASSERT_EQ(counts[j], 0) << "padded column " << j << " was drawn";
    int dof = 0;
    const double chi2 = chi_square(counts, softmax64(row, d.V), d.width, &dof);
    // Mean dof, sd sqrt(2 dof): dof + 6 sd is far in the tail (seeds are fixed: not flaky).
    EXPECT_LT(chi2, dof + 6.0 * std::sqrt(2.0 * dof)) << "V=" << d.V << " chi2 " << chi2 << " dof " << dof;
    EXPECT_GT(chi2, 0.0);
  }
}

TEST(CrossEntropySampled, CertainAndSingleColumnRows) {
  // One column holds all the mass (others underflow to 0): it is always the label.
  std::vector<float> row(64, -200.0f);
  row[37] = 0.0f;
  const std::vector<long> counts = draw_counts(row, 60, 64, 100, 5, 3);
  EXPECT_EQ(counts[37], 500);
  const std::vector<long> one = draw_counts({0.3f, 9.0f}, 1, 2, 10, 3, 3);  // V = 1
  EXPECT_EQ(one[0], 30);
  EXPECT_EQ(one[1], 0);
}

TEST(CrossEntropySampled, LabelsDependOnlyOnSeedCounterAndRow) {
  const Case c{257, 1000, 1024, 3.0f};
  const std::vector<float> logits = make_logits(c, 5, 0.0f);
  const std::vector<float> dloss(c.N, 1.0f);
  auto labels_for = [&](int threads, uint64_t seed, uint64_t counter, std::vector<float>* grad_out) {
    test::ScopedThreads scope(threads);
    std::vector<float> loss(c.N), grad(logits.size());
    std::vector<int> labels(c.N);
    crossentropy_sampled_forward_backward(loss.data(), grad.data(), labels.data(), logits.data(), dloss.data(), c.N,
                                          c.V, c.Vp, seed, counter);
    if (grad_out) *grad_out = grad;
    return labels;
  };
  std::vector<float> g1, g2;
  const std::vector<int> a = labels_for(1, 9, 4, &g1);
  EXPECT_EQ(a, labels_for(2, 9, 4, &g2));
  EXPECT_TRUE(test::bit_identical(g1, g2, "dlogits, 1 vs 2 threads"));
  EXPECT_EQ(a, labels_for(2, 9, 4, nullptr));  // and again: no hidden state
  // Row n's label does not depend on the rows around it: the first 100 rows alone agree.
  {
    std::vector<float> loss(100), grad(static_cast<size_t>(100) * c.Vp);
    std::vector<int> part(100);
    crossentropy_sampled_forward_backward(loss.data(), grad.data(), part.data(), logits.data(), dloss.data(), 100, c.V,
                                          c.Vp, 9, 4);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), a.begin()));
  }
  // Another counter or seed draws other labels (almost all rows differ at spread 3 over 1000).
  for (const std::vector<int>& b : {labels_for(2, 9, 5, nullptr), labels_for(2, 10, 4, nullptr)}) {
    int same = 0;
    for (int n = 0; n < c.N; ++n) same += a[n] == b[n];
    EXPECT_LT(same, c.N / 4);
  }
}

TEST(CrossEntropySampled, RejectsBadInput) {
  std::vector<float> logits(8, 0.0f), grad(8), loss(2), dloss(2, 0.5f);
  std::vector<int> labels(2);
  auto expect_error = [](auto&& call, const std::string& needle) {
    try {
      call();
      FAIL() << "expected mptrain::Error containing " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { crossentropy_sampled_forward_backward(loss.data(), grad.data(), labels.data(), logits.data(),
                                                           dloss.data(), 2, 5, 4, 1, 0); },
               "[crossentropy_sampled] bad size");
  expect_error([&] { crossentropy_sampled_forward_backward(loss.data(), nullptr, labels.data(), logits.data(),
                                                           dloss.data(), 2, 4, 4, 1, 0); },
               "[crossentropy_sampled] null pointer");
  logits[5] = std::nanf("");
  expect_error([&] { crossentropy_sampled_forward_backward(loss.data(), grad.data(), labels.data(), logits.data(),
                                                           dloss.data(), 2, 4, 4, 1, 0); },
               "row 1 has non-finite logits");
}

}  // namespace
}  // namespace mptrain::cpu
