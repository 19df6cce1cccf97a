// Fused softmax + cross-entropy over a padded vocabulary, and the sampling softmax, against
// float64 references: ignored rows (-1), padded columns holding NaN (never read, gradient 0),
// dlogits separate (poisoned) or aliasing logits, large logits (stability), and a loss-only call.
// The typed variant (16-bit dlogits) against the fp32 op followed by a conversion, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backend/ops/convert.h"
#include "backend/ops/crossentropy.h"
#include "core/error.h"
#include "op_test_util.h"

namespace mptrain::cpu {
namespace {

using test::all_close;
using test::Guarded;
using test::Tol;

struct CeCase {
  int N, V, Vp;
  float spread, offset;  // logits = offset + spread·N(0,1)
  Tol loss_tol, grad_tol;
};
// The loss is max + log Σ - z[target] with Σ summed in double, so it is good to about one fp32
// rounding even for logits near 1000 and a 50k vocabulary; gradients are probabilities times
// dloss, with a few-ulp error from the vectorised exp.
const CeCase kCases[] = {
    {3, 1, 1, 1.0f, 0.0f, {1e-6, 1e-6}, {1e-7, 1e-6}},
    {4, 5, 8, 2.0f, 0.0f, {1e-6, 1e-6}, {1e-7, 1e-5}},
    {7, 31, 32, 3.0f, 0.0f, {1e-6, 1e-6}, {1e-7, 1e-5}},
    {7, 32, 32, 3.0f, 0.0f, {1e-6, 1e-6}, {1e-7, 1e-5}},
    {7, 33, 64, 3.0f, 0.0f, {1e-6, 1e-6}, {1e-7, 1e-5}},
    {5, 1000, 1024, 4.0f, 0.0f, {1e-6, 1e-6}, {1e-7, 1e-5}},
    {4, 129, 131, 30.0f, 1000.0f, {1e-6, 1e-6}, {1e-7, 1e-5}},
    {3, 50257, 50304, 2.0f, -5.0f, {1e-6, 1e-6}, {1e-8, 1e-5}},
};

struct Data {
  std::vector<float> logits;
  std::vector<int> targets;
  std::vector<float> dloss;
};

Data make_data(const CeCase& cc, uint64_t seed) {
  Data d;
  d.logits = test::randn(static_cast<size_t>(cc.N) * cc.Vp, seed, cc.spread);
  for (int n = 0; n < cc.N; ++n)
    for (int j = 0; j < cc.Vp; ++j) {
      float& z = d.logits[static_cast<size_t>(n) * cc.Vp + j];
      z = j < cc.V ? z + cc.offset : test::kPoison;  // padding must never be read
    }
  d.targets.resize(cc.N);
  for (int n = 0; n < cc.N; ++n)
    d.targets[n] = (n % 3 == 1) ? -1 : static_cast<int>(uniform01(seed, 9, n) * cc.V) % cc.V;
  d.dloss = test::uniform(cc.N, seed + 1, 0.1f, 1.0f);
  return d;
}

void reference(std::vector<double>& loss, std::vector<double>& grad, const Data& d, const CeCase& cc) {
  loss.assign(cc.N, 0.0);
  grad.assign(static_cast<size_t>(cc.N) * cc.Vp, 0.0);
  for (int n = 0; n < cc.N; ++n) {
    if (d.targets[n] < 0) continue;
    const float* z = d.logits.data() + static_cast<size_t>(n) * cc.Vp;
    double m = z[0];
    for (int j = 1; j < cc.V; ++j) m = std::max(m, static_cast<double>(z[j]));
    double s = 0.0;
    for (int j = 0; j < cc.V; ++j) s += std::exp(z[j] - m);
    loss[n] = m + std::log(s) - z[d.targets[n]];
    for (int j = 0; j < cc.V; ++j)
      grad[static_cast<size_t>(n) * cc.Vp + j] = d.dloss[n] * (std::exp(z[j] - m) / s - (j == d.targets[n]));
  }
}

std::string name(const CeCase& cc) {
  return " N=" + std::to_string(cc.N) + " V=" + std::to_string(cc.V) + " Vp=" + std::to_string(cc.Vp);
}

TEST(CrossEntropy, LossAndSeparateGradient) {
  uint64_t seed = 70;
  for (const CeCase& cc : kCases) {
    Data d = make_data(cc, ++seed);
    std::vector<double> rloss, rgrad;
    reference(rloss, rgrad, d, cc);
    Guarded loss(cc.N), grad(static_cast<size_t>(cc.N) * cc.Vp);
    crossentropy_forward_backward(loss.data(), grad.data(), d.logits.data(), d.targets.data(), d.dloss.data(),
                                  cc.N, cc.V, cc.Vp);
    EXPECT_TRUE(all_close(loss.values(), rloss, cc.loss_tol, "loss" + name(cc)));
    EXPECT_TRUE(all_close(grad.values(), rgrad, cc.grad_tol, "dlogits" + name(cc)));
    EXPECT_TRUE(loss.guards_intact() && grad.guards_intact()) << name(cc);
  }
}

TEST(CrossEntropy, GradientInPlace) {
  uint64_t seed = 170;
  for (const CeCase& cc : kCases) {
    Data d = make_data(cc, ++seed);
    std::vector<double> rloss, rgrad;
    reference(rloss, rgrad, d, cc);
    Guarded loss(cc.N), buf(d.logits);
    crossentropy_forward_backward(loss.data(), buf.data(), buf.data(), d.targets.data(), d.dloss.data(), cc.N,
                                  cc.V, cc.Vp);
    EXPECT_TRUE(all_close(loss.values(), rloss, cc.loss_tol, "loss, in place" + name(cc)));
    EXPECT_TRUE(all_close(buf.values(), rgrad, cc.grad_tol, "dlogits, in place" + name(cc)));
    EXPECT_TRUE(loss.guards_intact() && buf.guards_intact()) << name(cc);
  }
}

// The typed op writes the bits that the fp32 op plus one RNE conversion give, the same losses,
// and nothing past its buffers; fp32 is the fp32 op itself.
TEST(CrossEntropy, TypedGradientIsTheRoundedFp32Gradient) {
  uint64_t seed = 570;
  for (const StorageType td : {StorageType::BF16, StorageType::F16, StorageType::F32}) {
    for (const CeCase& cc : kCases) {
      Data d = make_data(cc, ++seed);
      const size_t n = static_cast<size_t>(cc.N) * cc.Vp, words = (n * storage_bytes(td) + 3) / 4;
      Guarded ref_loss(cc.N), ref_grad(n), loss(cc.N), grad(words);
      crossentropy_forward_backward(ref_loss.data(), ref_grad.data(), d.logits.data(), d.targets.data(),
                                    d.dloss.data(), cc.N, cc.V, cc.Vp);
      std::vector<float> want(words, 0.0f);
      convert(want.data(), td, ref_grad.data(), StorageType::F32, n);
      crossentropy_forward_backward_typed(loss.data(), grad.data(), td, d.logits.data(), d.targets.data(),
                                          d.dloss.data(), cc.N, cc.V, cc.Vp);
      const std::string what = std::string(storage_name(td)) + name(cc);
      // Bytes, not floats: the last word of an odd-length 16-bit buffer is half poison.
      EXPECT_EQ(std::memcmp(grad.data(), want.data(), n * storage_bytes(td)), 0) << "dlogits " << what;
      EXPECT_EQ(std::memcmp(loss.data(), ref_loss.data(), cc.N * sizeof(float)), 0) << "loss " << what;
      EXPECT_TRUE(loss.guards_intact() && grad.guards_intact()) << what;
    }
  }
}

TEST(CrossEntropy, TypedRejectsAliasingAndNulls) {
  const CeCase cc{2, 6, 8, 1.0f, 0.0f, {0, 0}, {0, 0}};
  Data d = make_data(cc, 3);
  std::vector<float> loss(cc.N);
  for (const bool alias : {true, false}) {
    try {
      crossentropy_forward_backward_typed(loss.data(), alias ? d.logits.data() : nullptr, StorageType::BF16,
                                          d.logits.data(), d.targets.data(), d.dloss.data(), cc.N, cc.V, cc.Vp);
      FAIL() << "expected mptrain::Error, alias=" << alias;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(alias ? "alias" : "null pointer"), std::string::npos) << e.what();
    }
  }
}

TEST(CrossEntropy, LossOnly) {
  uint64_t seed = 270;
  for (const CeCase& cc : kCases) {
    Data d = make_data(cc, ++seed);
    std::vector<double> rloss, rgrad;
    reference(rloss, rgrad, d, cc);
    Guarded loss(cc.N);
    crossentropy_forward_backward(loss.data(), nullptr, d.logits.data(), d.targets.data(), nullptr, cc.N,
                                  cc.V, cc.Vp);
    EXPECT_TRUE(all_close(loss.values(), rloss, cc.loss_tol, "loss only" + name(cc)));
  }
}

TEST(CrossEntropy, ReferenceGradientMatchesFiniteDifferences) {
  const CeCase cc{2, 6, 8, 2.0f, 0.0f, {0, 0}, {0, 0}};
  Data d = make_data(cc, 5);
  d.targets = {3, 0};
  std::vector<double> rloss, rgrad;
  reference(rloss, rgrad, d, cc);
  for (int n = 0; n < cc.N; ++n) {
    std::vector<double> z(d.logits.begin() + n * cc.Vp, d.logits.begin() + n * cc.Vp + cc.V);
    auto loss = [&](const std::vector<double>& v) {
      double m = v[0], s = 0;
      for (double x : v) m = std::max(m, x);
      for (double x : v) s += std::exp(x - m);
      return d.dloss[n] * (m + std::log(s) - v[d.targets[n]]);
    };
    for (int j = 0; j < cc.V; ++j)
      EXPECT_NEAR(rgrad[static_cast<size_t>(n) * cc.Vp + j], test::finite_difference(loss, z, j), 1e-8);
  }
}

TEST(CrossEntropy, RejectsTargetOutsideVocabulary) {
  std::vector<float> logits(8, 0.0f), loss(2);
  for (int bad : {4, -2}) {
    std::vector<int> targets{0, bad};
    try {
      crossentropy_forward_backward(loss.data(), nullptr, logits.data(), targets.data(), nullptr, 2, 4, 4);
      FAIL() << "expected mptrain::Error for target " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("[crossentropy]"), std::string::npos) << e.what();
    }
  }
}

TEST(Softmax, TemperatureAndPadding) {
  uint64_t seed = 90;
  for (const CeCase& cc : kCases) {
    for (float temp : {1.0f, 0.7f, 2.5f}) {
      Data d = make_data(cc, ++seed);
      Guarded probs(static_cast<size_t>(cc.N) * cc.Vp);
      softmax_forward(probs.data(), d.logits.data(), cc.N, cc.V, cc.Vp, temp);
      std::vector<double> ref(probs.size(), 0.0);
      for (int n = 0; n < cc.N; ++n) {
        const float* z = d.logits.data() + static_cast<size_t>(n) * cc.Vp;
        double m = z[0], s = 0;
        for (int j = 0; j < cc.V; ++j) m = std::max(m, static_cast<double>(z[j]));
        for (int j = 0; j < cc.V; ++j) s += std::exp((z[j] - m) / temp);
        for (int j = 0; j < cc.V; ++j)
          ref[static_cast<size_t>(n) * cc.Vp + j] = std::exp((z[j] - m) / temp) / s;
      }
      EXPECT_TRUE(
          all_close(probs.values(), ref, {1e-7, 1e-5}, "softmax T=" + std::to_string(temp) + name(cc)));
      EXPECT_TRUE(probs.guards_intact());
    }
  }
}

}  // namespace
}  // namespace mptrain::cpu
