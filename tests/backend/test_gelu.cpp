// GELU (tanh form) forward and backward against the float64 formula, over a range that covers
// the saturated tails; the analytic derivative is itself checked by finite differences. The fused
// fc epilogue (bias + GELU, both forms) against its unfused twin: bit for bit for the tanh form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "backend/ops/convert.h"
#include "backend/ops/gemm_mixed.h"
#include "common/cpu_fp32.h"
#include "op_test_util.h"

namespace mptrain::cpu {
namespace {

using test::all_close;
using test::Guarded;
using test::Tol;

constexpr double kS = 0.79788456080286535588;  // sqrt(2/pi)

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::tanh(kS * (x + 0.044715 * x * x * x))); }
double gelu_grad_ref(double x) {
  const double u = kS * (x + 0.044715 * x * x * x);
  const double th = std::tanh(u);
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * kS * (1.0 + 3.0 * 0.044715 * x * x);
}

const size_t kSizes[] = {1, 15, 16, 17, 127, 128, 129, 4099};
// A few-ulp error in exp and the division; atol covers values near zero where rtol alone is
// too strict (gelu(x) ~ x/2 and the derivative ~ 1/2 there, so the absolute scale is ~1).
const Tol kFwdTol{2e-7, 2e-6};
const Tol kBwdTol{5e-7, 5e-6};

// Inputs: N(0, 3) plus fixed extremes (deep negative tail, large positive, exact zero).
std::vector<float> inputs(size_t n, uint64_t seed) {
  auto x = test::randn(n, seed, 3.0f);
  const float special[] = {0.0f, -0.0f, -30.0f, 30.0f, -9.5f, 1e-8f, -1e-8f, -200.0f, 200.0f, -5.0f};
  for (size_t i = 0; i < n && i < std::size(special); ++i) x[i] = special[i];
  return x;
}

TEST(Gelu, Forward) {
  for (size_t n : kSizes) {
    auto x = inputs(n, n);
    Guarded out(n);
    gelu_forward(out.data(), x.data(), n);
    std::vector<double> ref(n);
    for (size_t i = 0; i < n; ++i) ref[i] = gelu_ref(x[i]);
    EXPECT_TRUE(all_close(out.values(), ref, kFwdTol, "gelu_forward n=" + std::to_string(n)));
    EXPECT_TRUE(out.guards_intact());
  }
}

TEST(Gelu, BackwardOverwritesAndMayAliasDout) {
  for (size_t n : kSizes) {
    auto x = inputs(n, n + 1);
    auto dout = test::randn(n, n + 2);
    Guarded dinp(n);
    gelu_backward(dinp.data(), x.data(), dout.data(), n);
    std::vector<double> ref(n);
    for (size_t i = 0; i < n; ++i) ref[i] = gelu_grad_ref(x[i]) * dout[i];
    EXPECT_TRUE(all_close(dinp.values(), ref, kBwdTol, "gelu_backward n=" + std::to_string(n)));
    EXPECT_TRUE(dinp.guards_intact());
    auto inplace = dout;
    gelu_backward(inplace.data(), x.data(), inplace.data(), n);
    EXPECT_TRUE(all_close(inplace, ref, kBwdTol, "gelu_backward dinp == dout"));
  }
}

TEST(Gelu, ReferenceDerivativeMatchesFiniteDifferences) {
  for (double x : {-6.0, -2.5, -1.0, -0.3, 0.0, 0.2, 0.7, 1.5, 3.0, 6.0}) {
    const double h = 1e-6;
    const double fd = (gelu_ref(x + h) - gelu_ref(x - h)) / (2 * h);
    EXPECT_NEAR(gelu_grad_ref(x), fd, 1e-8) << "x=" << x;
  }
}

// Widened values of n elements of dtype t at p (convert's exact widening, as the other typed
// tests read their outputs).
std::vector<float> widened(const void* p, StorageType t, size_t n) {
  std::vector<float> v(n);
  convert(v.data(), StorageType::F32, p, t, n);
  return v;
}

// The erf form's passes may take libmvec's vector erfcf and libm's scalar one for the same
// element (each loop's tail is scalar, and the chunks fall differently), which differ by an ulp
// or two of erfc: at most 0.5·|x|·3e-7 in gelu (kept absolute in x, as when Phi was 1 + erf),
// then one ulp of the output dtype where the rounding falls the other way.
::testing::AssertionResult erf_pair_close(const std::vector<float>& pre, const std::vector<float>& got,
                                          const std::vector<float>& ref, StorageType to) {
  const double ulp = to == StorageType::F32 ? 0x1p-23 : to == StorageType::BF16 ? 0x1p-7 : 0x1p-10;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = 1.5e-7 * std::fabs(pre[i]) + ulp * std::fabs(ref[i]) + 1e-7;
    if (!(std::fabs(got[i] - ref[i]) <= tol))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " vs " << ref[i] << " (pre " << pre[i] << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST(Gelu, FusedBiasGeluMatchesTheUnfusedPair) {
  const StorageType types[] = {StorageType::BF16, StorageType::F16, StorageType::F32};
  for (const GeluForm form : {GeluForm::Tanh, GeluForm::Erf}) {
    for (const StorageType tp : types) {
      for (const StorageType to : types) {
        for (const int OC : {1, 33, 1000, 1025, 3072}) {
          for (const bool with_bias : {true, false}) {
            const int N = 7;
            const size_t n = static_cast<size_t>(N) * OC;
            const std::vector<float> acc = test::randn(n, 40 + OC, 3.0f), bias = test::randn(OC, 41, 0.5f);
            const float* b = with_bias ? bias.data() : nullptr;
            const size_t wp = (n * storage_bytes(tp) + 3) / 4 + 1, wo = (n * storage_bytes(to) + 3) / 4 + 1;
            std::vector<float> pre_ref(wp, 0.0f), out_ref(wo, 0.0f);
            bias_forward_typed(pre_ref.data(), tp, acc.data(), b, N, OC);
            if (form == GeluForm::Tanh)
              gelu_forward_typed(out_ref.data(), to, pre_ref.data(), tp, n);
            else
              gelu_erf_forward_typed(out_ref.data(), to, pre_ref.data(), tp, n);
            Guarded pre(wp), out(wo);
            bias_gelu_forward_typed(pre.data(), tp, out.data(), to, acc.data(), b, N, OC, form);
            const std::string what = std::string(form == GeluForm::Tanh ? "tanh " : "erf ") +
                                     storage_name(tp) + "->" + storage_name(to) +
                                     " OC=" + std::to_string(OC) + (with_bias ? "" : " no bias");
            EXPECT_EQ(std::memcmp(pre.data(), pre_ref.data(), n * storage_bytes(tp)), 0) << "pre " << what;
            if (form == GeluForm::Tanh)
              EXPECT_EQ(std::memcmp(out.data(), out_ref.data(), n * storage_bytes(to)), 0) << "out " << what;
            else
              EXPECT_TRUE(erf_pair_close(widened(pre_ref.data(), tp, n), widened(out.data(), to, n),
                                         widened(out_ref.data(), to, n), to))
                  << "out " << what;
            EXPECT_TRUE(pre.guards_intact() && out.guards_intact()) << what;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace mptrain::cpu
