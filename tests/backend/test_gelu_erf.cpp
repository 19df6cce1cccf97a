// Exact (erf) GELU, BERT's activation: forward against the float64 formula, backward against
// the float64 derivative and that derivative against central finite differences of the forward.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>

#include "common/cpu_fp32.h"
#include "op_test_util.h"

namespace mptrain::cpu {
namespace {

using test::all_close;
using test::Guarded;
using test::Tol;

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_grad_ref(double x) {
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

const size_t kSizes[] = {1, 15, 16, 17, 129, 4099};

std::vector<float> inputs(size_t n, uint64_t seed) {
  auto x = test::randn(n, seed, 3.0f);
  const float special[] = {0.0f, -0.0f, -30.0f, 30.0f, -9.5f, 1e-8f, -1e-8f, -200.0f, 200.0f, -5.0f};
  for (size_t i = 0; i < n && i < std::size(special); ++i) x[i] = special[i];
  return x;
}

TEST(GeluErf, ForwardAndBackward) {
  for (size_t n : kSizes) {
    auto x = inputs(n, n);
    auto dout = test::randn(n, n + 7);
    Guarded out(n), dinp(n);
    gelu_erf_forward(out.data(), x.data(), n);
    gelu_erf_backward(dinp.data(), x.data(), dout.data(), n);
    std::vector<double> ref(n), dref(n);
    for (size_t i = 0; i < n; ++i) ref[i] = gelu_ref(x[i]), dref[i] = gelu_grad_ref(x[i]) * dout[i];
    EXPECT_TRUE(all_close(out.values(), ref, Tol{2e-7, 2e-6}, "gelu_erf_forward n=" + std::to_string(n)));
    EXPECT_TRUE(all_close(dinp.values(), dref, Tol{5e-7, 5e-6}, "gelu_erf_backward n=" + std::to_string(n)));
    EXPECT_TRUE(out.guards_intact() && dinp.guards_intact());
    // In place (dinp aliasing dout), as the model calls it.
    std::vector<float> inplace = dout;
    gelu_erf_backward(inplace.data(), x.data(), inplace.data(), n);
    EXPECT_TRUE(test::bit_identical(inplace, dinp.values(), "aliased backward"));
  }
}

TEST(GeluErf, DerivativeMatchesFiniteDifferencesAndDiffersFromTanhForm) {
  for (double x = -6.0; x <= 6.0; x += 0.37) {
    const double fd = (gelu_ref(x + 1e-6) - gelu_ref(x - 1e-6)) / 2e-6;
    EXPECT_NEAR(gelu_grad_ref(x), fd, 1e-8) << x;
  }
  // The op really is the erf form: at x = 1.5 the tanh approximation differs by ~1e-4.
  const float x = 1.5f;
  float exact, approx;
  gelu_erf_forward(&exact, &x, 1);
  gelu_forward(&approx, &x, 1);
  EXPECT_NEAR(exact, gelu_ref(1.5), 1e-6);
  EXPECT_GT(std::fabs(exact - approx), 5e-5);
}

}  // namespace
}  // namespace mptrain::cpu
