// Bidirectional attention under a key padding mask (BERT): forward against a plain float64
// implementation, and the backward against central finite differences of that float64 forward
// (so the op's gradient is checked against the function itself, not a second hand-derived
// formula). Masks cover no padding, padding at the end, holes, and a single real key; outputs
// start as NaN with sentinels after them. Padded keys must get probability exactly 0 and no
// gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backend/cpu/context.h"
#include "backend/ops/attention.h"
#include "common/cpu_fp32.h"
#include "core/error.h"
#include "op_test_util.h"

namespace mptrain::cpu {
namespace {

using test::all_close;
using test::Guarded;
using test::Tol;

// out and dqkv as a float64 function of qkv: one row per (b, t) of C outputs.
std::vector<double> ref_forward(const std::vector<double>& qkv, const std::vector<int>& mask, int B, int T, int C,
                                int NH) {
  const int HS = C / NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  std::vector<double> out(static_cast<size_t>(B) * T * C), p(T);
  auto at = [&](int b, int t, int part, int h, int d) {
    return qkv[(static_cast<size_t>(b) * T + t) * 3 * C + static_cast<size_t>(part) * C + h * HS + d];
  };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        double m = -1e300, sum = 0;
        for (int j = 0; j < T; ++j) {
          if (!mask[b * T + j]) continue;
          double s = 0;
          for (int d = 0; d < HS; ++d) s += at(b, t, 0, h, d) * at(b, j, 1, h, d);
          p[j] = s * scale;
          m = std::max(m, p[j]);
        }
        for (int j = 0; j < T; ++j) sum += mask[b * T + j] ? (p[j] = std::exp(p[j] - m)) : (p[j] = 0.0);
        for (int d = 0; d < HS; ++d) {
          double y = 0;
          for (int j = 0; j < T; ++j) y += p[j] / sum * at(b, j, 2, h, d);
          out[(static_cast<size_t>(b) * T + t) * C + h * HS + d] = y;
        }
      }
  return out;
}

struct MaskCase {
  int B, T, C, NH;
  const char* pattern;  // per sequence: 'p' = padding at the end, 'h' = holes, 'f' = full, '1' = one key
};
const MaskCase kCases[] = {{1, 1, 8, 1, "f"},      {2, 7, 24, 3, "pf"},   {3, 33, 32, 2, "hp1"},
                           {2, 64, 64, 4, "pp"},    {1, 129, 48, 3, "h"}};

std::vector<int> make_mask(const MaskCase& mc) {
  std::vector<int> m(static_cast<size_t>(mc.B) * mc.T);
  for (int b = 0; b < mc.B; ++b)
    for (int t = 0; t < mc.T; ++t) {
      const char kind = mc.pattern[b];
      int v = 1;
      if (kind == 'p') v = t < (2 * mc.T + 2) / 3;
      if (kind == 'h') v = t % 5 != 3;
      if (kind == '1') v = t == 0;
      m[static_cast<size_t>(b) * mc.T + t] = v;
    }
  return m;
}

std::string name(const MaskCase& mc) {
  return " B=" + std::to_string(mc.B) + " T=" + std::to_string(mc.T) + " C=" + std::to_string(mc.C) +
         " NH=" + std::to_string(mc.NH) + " mask=" + mc.pattern;
}

TEST(AttentionMasked, ForwardMatchesFloat64AndPaddedKeysGetZero) {
  Context ctx;
  uint64_t seed = 70;
  for (const MaskCase& mc : kCases) {
    const int B = mc.B, T = mc.T, C = mc.C, NH = mc.NH;
    const auto mask = make_mask(mc);
    auto qkv = test::randn(static_cast<size_t>(B) * T * 3 * C, ++seed);
    Guarded out(static_cast<size_t>(B) * T * C), saved(attention_saved_floats(B, T, C, NH));
    Guarded scratch(attention_scratch_floats(B, T, C, NH));
    attention_masked_forward(out.data(), saved.data(), qkv.data(), mask.data(), scratch.data(), B, T, C, NH, ctx);
    EXPECT_TRUE(all_close(out.values(), ref_forward(test::to_double(qkv), mask, B, T, C, NH), Tol{1e-5, 1e-4},
                          "out" + name(mc)));
    size_t leaked = 0;
    for (int b = 0; b < B; ++b)
      for (int r = 0; r < NH * T; ++r)
        for (int j = 0; j < T; ++j)
          leaked += !mask[static_cast<size_t>(b) * T + j] && saved[((static_cast<size_t>(b) * NH * T) + r) * T + j] != 0.0f;
    EXPECT_EQ(leaked, 0u) << name(mc);
    EXPECT_TRUE(out.guards_intact() && saved.guards_intact()) << name(mc);
  }
}

TEST(AttentionMasked, BackwardMatchesFiniteDifferences) {
  Context ctx;
  uint64_t seed = 90;
  for (const MaskCase& mc : kCases) {
    const int B = mc.B, T = mc.T, C = mc.C, NH = mc.NH;
    if (static_cast<size_t>(B) * T * C > 4096) continue;  // finite differences cost O(n²)
    const auto mask = make_mask(mc);
    auto qkv = test::randn(static_cast<size_t>(B) * T * 3 * C, ++seed);
    auto g = test::randn(static_cast<size_t>(B) * T * C, ++seed);
    std::vector<float> out(g.size()), saved(attention_saved_floats(B, T, C, NH));
    std::vector<float> scratch(attention_scratch_floats(B, T, C, NH));
    Guarded dqkv(qkv.size());
    attention_masked_forward(out.data(), saved.data(), qkv.data(), mask.data(), scratch.data(), B, T, C, NH, ctx);
    attention_masked_backward(dqkv.data(), g.data(), qkv.data(), saved.data(), scratch.data(), B, T, C, NH, ctx);
    // d(sum g·out)/d qkv by central differences of the float64 forward.
    auto x = test::to_double(qkv);
    const auto gd = test::to_double(g);
    auto loss = [&](const std::vector<double>& v) { return test::dot(ref_forward(v, mask, B, T, C, NH), gd); };
    std::vector<double> fd(x.size());
    for (size_t i = 0; i < x.size(); ++i) fd[i] = test::finite_difference(loss, x, i);
    EXPECT_TRUE(all_close(dqkv.values(), fd, Tol{2e-5, 1e-4}, "dqkv" + name(mc)));
    EXPECT_TRUE(dqkv.guards_intact()) << name(mc);
    // Keys and values of padded positions get exactly no gradient.
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t)
        if (!mask[static_cast<size_t>(b) * T + t]) {
          for (int c = C; c < 3 * C; ++c)
            ASSERT_EQ(dqkv[(static_cast<size_t>(b) * T + t) * 3 * C + c], 0.0f) << name(mc) << " t=" << t;
        }
  }
}

TEST(AttentionMasked, NullMaskIsAllRealAndAllPaddingIsRefused) {
  Context ctx;
  const int B = 2, T = 9, C = 16, NH = 2;
  auto qkv = test::randn(static_cast<size_t>(B) * T * 3 * C, 5);
  std::vector<float> a(static_cast<size_t>(B) * T * C), b(a.size()), saved(attention_saved_floats(B, T, C, NH));
  std::vector<float> scratch(attention_scratch_floats(B, T, C, NH));
  std::vector<int> ones(static_cast<size_t>(B) * T, 1);
  attention_masked_forward(a.data(), saved.data(), qkv.data(), nullptr, scratch.data(), B, T, C, NH, ctx);
  attention_masked_forward(b.data(), saved.data(), qkv.data(), ones.data(), scratch.data(), B, T, C, NH, ctx);
  EXPECT_TRUE(test::bit_identical(a, b, "null mask vs all ones"));
  std::vector<int> zeros = ones;
  std::fill(zeros.begin() + T, zeros.end(), 0);
  EXPECT_THROW(attention_masked_forward(a.data(), saved.data(), qkv.data(), zeros.data(), scratch.data(), B, T, C,
                                        NH, ctx),
               Error);
}

}  // namespace
}  // namespace mptrain::cpu
