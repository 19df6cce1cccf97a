// Causal attention forward (out, saved probabilities) and backward (dqkv, overwritten) against a
// plain float64 implementation, for sequence lengths around the 64-row causal block of the CPU
// kernel and head sizes around vector widths. Outputs, saved state, scratch and dqkv start as
// NaN, so any element read before it is written, or never written, shows up.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backend/cpu/context.h"
#include "backend/ops/attention.h"
#include "backend/ops/convert.h"
#include "common/cpu_fp32.h"
#include "op_test_util.h"

namespace mptrain::cpu {
namespace {

using test::all_close;
using test::Guarded;
using test::Tol;

struct AttnCase {
  int B, T, C, NH;
};
const AttnCase kCases[] = {{1, 1, 8, 1},    {2, 7, 24, 3},   {2, 64, 64, 4},  {1, 65, 40, 2},
                           {1, 127, 62, 2}, {1, 128, 33, 1}, {1, 130, 96, 3}, {2, 257, 32, 1}};
const Tol kOutTol{1e-5, 1e-4};
const Tol kAttTol{1e-6, 1e-4};
const Tol kGradTol{2e-5, 1e-4};

struct Ref {
  std::vector<double> out, att;
};

Ref ref_forward(const std::vector<double>& qkv, int B, int T, int C, int NH) {
  const int HS = C / NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  Ref r{std::vector<double>(static_cast<size_t>(B) * T * C),
        std::vector<double>(static_cast<size_t>(B) * NH * T * T)};
  auto at = [&](int b, int t, int part, int h, int d) {
    return qkv[(static_cast<size_t>(b) * T + t) * 3 * C + static_cast<size_t>(part) * C + h * HS + d];
  };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        double* p = r.att.data() + ((static_cast<size_t>(b) * NH + h) * T + t) * T;
        double m = -1e300;
        for (int j = 0; j <= t; ++j) {
          double s = 0;
          for (int d = 0; d < HS; ++d) s += at(b, t, 0, h, d) * at(b, j, 1, h, d);
          p[j] = s * scale;
          m = std::max(m, p[j]);
        }
        double sum = 0;
        for (int j = 0; j <= t; ++j) sum += (p[j] = std::exp(p[j] - m));
        for (int j = 0; j <= t; ++j) p[j] /= sum;
        for (int d = 0; d < HS; ++d) {
          double y = 0;
          for (int j = 0; j <= t; ++j) y += p[j] * at(b, j, 2, h, d);
          r.out[(static_cast<size_t>(b) * T + t) * C + h * HS + d] = y;
        }
      }
  return r;
}

std::vector<double> ref_backward(const std::vector<double>& dout, const std::vector<double>& qkv, int B,
                                 int T, int C, int NH) {
  const int HS = C / NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  Ref f = ref_forward(qkv, B, T, C, NH);
  std::vector<double> dqkv(qkv.size(), 0.0), dp(T);
  auto idx = [&](int b, int t, int part, int h, int d) {
    return (static_cast<size_t>(b) * T + t) * 3 * C + static_cast<size_t>(part) * C + h * HS + d;
  };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const double* p = f.att.data() + ((static_cast<size_t>(b) * NH + h) * T + t) * T;
        const double* dy = dout.data() + (static_cast<size_t>(b) * T + t) * C + h * HS;
        double dot = 0;
        for (int j = 0; j <= t; ++j) {
          dp[j] = 0;
          for (int d = 0; d < HS; ++d) {
            dp[j] += dy[d] * qkv[idx(b, j, 2, h, d)];
            dqkv[idx(b, j, 2, h, d)] += p[j] * dy[d];
          }
          dot += p[j] * dp[j];
        }
        for (int j = 0; j <= t; ++j) {
          const double ds = p[j] * (dp[j] - dot) * scale;
          for (int d = 0; d < HS; ++d) {
            dqkv[idx(b, t, 0, h, d)] += ds * qkv[idx(b, j, 1, h, d)];
            dqkv[idx(b, j, 1, h, d)] += ds * qkv[idx(b, t, 0, h, d)];
          }
        }
      }
  return dqkv;
}

std::string name(const AttnCase& ac) {
  return " B=" + std::to_string(ac.B) + " T=" + std::to_string(ac.T) + " C=" + std::to_string(ac.C) +
         " NH=" + std::to_string(ac.NH);
}

TEST(Attention, ForwardAndBackward) {
  Context ctx;
  uint64_t seed = 30;
  for (const AttnCase& ac : kCases) {
    const int B = ac.B, T = ac.T, C = ac.C, NH = ac.NH;
    auto qkv = test::randn(static_cast<size_t>(B) * T * 3 * C, ++seed);
    auto dout = test::randn(static_cast<size_t>(B) * T * C, ++seed);
    Guarded out(static_cast<size_t>(B) * T * C), saved(attention_saved_floats(B, T, C, NH));
    Guarded scratch(attention_scratch_floats(B, T, C, NH)), dqkv(qkv.size());
    attention_forward(out.data(), saved.data(), qkv.data(), scratch.data(), B, T, C, NH, ctx);
    attention_backward(dqkv.data(), dout.data(), qkv.data(), saved.data(), scratch.data(), B, T, C, NH, ctx);

    Ref r = ref_forward(test::to_double(qkv), B, T, C, NH);
    EXPECT_TRUE(all_close(out.values(), r.out, kOutTol, "out" + name(ac)));
    EXPECT_TRUE(all_close(saved.values(), r.att, kAttTol, "att" + name(ac)));
    size_t nonzero_above = 0;
    for (size_t bh = 0; bh < static_cast<size_t>(B) * NH; ++bh)
      for (int t = 0; t < T; ++t)
        for (int j = t + 1; j < T; ++j) nonzero_above += saved[(bh * T + t) * T + j] != 0.0f;
    EXPECT_EQ(nonzero_above, 0u) << "att above the diagonal must be exactly 0" << name(ac);
    auto rd = ref_backward(test::to_double(dout), test::to_double(qkv), B, T, C, NH);
    EXPECT_TRUE(all_close(dqkv.values(), rd, kGradTol, "dqkv" + name(ac)));
    EXPECT_TRUE(out.guards_intact() && saved.guards_intact() && scratch.guards_intact() &&
                dqkv.guards_intact())
        << name(ac);
  }
}

TEST(Attention, RepeatedRunsAreBitIdentical) {
  Context ctx;
  const int B = 2, T = 150, C = 64, NH = 2;
  auto qkv = test::randn(static_cast<size_t>(B) * T * 3 * C, 1);
  auto dout = test::randn(static_cast<size_t>(B) * T * C, 2);
  std::vector<float> out(dout.size()), saved(attention_saved_floats(B, T, C, NH));
  std::vector<float> scratch(attention_scratch_floats(B, T, C, NH)), d[2];
  for (int run = 0; run < 2; ++run) {
    d[run].assign(qkv.size(), 0.0f);
    attention_forward(out.data(), saved.data(), qkv.data(), scratch.data(), B, T, C, NH, ctx);
    attention_backward(d[run].data(), dout.data(), qkv.data(), saved.data(), scratch.data(), B, T, C, NH,
                       ctx);
  }
  EXPECT_TRUE(test::bit_identical(d[0], d[1], "dqkv"));
}

TEST(Attention, ReferenceBackwardMatchesFiniteDifferences) {
  const int B = 1, T = 5, C = 6, NH = 2;
  auto qkv = test::to_double(test::randn(static_cast<size_t>(B) * T * 3 * C, 3));
  auto g = test::to_double(test::randn(static_cast<size_t>(B) * T * C, 4));
  auto grad = ref_backward(g, qkv, B, T, C, NH);
  auto loss = [&](const std::vector<double>& x) { return test::dot(ref_forward(x, B, T, C, NH).out, g); };
  for (size_t i = 0; i < qkv.size(); ++i)
    EXPECT_NEAR(grad[i], test::finite_difference(loss, qkv, i), 1e-7) << i;
}

// Grouped-query attention against multi-head attention over the same heads repeated: kv_heads
// key/value heads read by NH / kv_heads query heads each give the outputs of plain attention whose
// k and v heads are the group's copies, and a key/value head's gradient is the sum of its copies'.
// Causal and bidirectional, multi-query (1) and grouped (2) of 4 heads, T across a row block.
TEST(Attention, GroupedQueryMatchesMultiHeadOverRepeatedHeads) {
  const int B = 2, NH = 4, HS = 8, C = NH * HS;
  Context ctx;
  for (const int T : {5, 70})
    for (const int KV : {1, 2})
      for (const bool causal : {true, false}) {
        SCOPED_TRACE("T=" + std::to_string(T) + " KV=" + std::to_string(KV) + (causal ? " causal" : ""));
        const int G = NH / KV, W = (NH + 2 * KV) * HS;
        const size_t rows = static_cast<size_t>(B) * T;
        const auto qkv = test::randn(rows * W, 300 + T + KV, 1.0f);
        const auto dout = test::randn(rows * C, 400 + T + KV, 1.0f);
        // The multi-head input: query heads as they are, key/value head h / G copied to head h.
        std::vector<float> qkv_mha(rows * 3 * C);
        for (size_t r = 0; r < rows; ++r)
          for (int h = 0; h < NH; ++h)
            for (int d = 0; d < HS; ++d) {
              const float* g = qkv.data() + r * W;
              float* m = qkv_mha.data() + r * 3 * C;
              m[h * HS + d] = g[h * HS + d];
              m[C + h * HS + d] = g[C + (h / G) * HS + d];
              m[2 * C + h * HS + d] = g[C + KV * HS + (h / G) * HS + d];
            }
        const auto types = fp32::attention_types();
        std::vector<float> saved(attention_saved_floats(B, T, C, NH)), scratch(attention_scratch_floats(B, T, C, NH));
        GemmWorkspace ws(ctx);
        std::vector<float> out_gqa(rows * C), out_mha(rows * C), d_gqa(rows * W), d_mha(rows * 3 * C);
        attention_forward_typed(out_gqa.data(), saved.data(), qkv.data(), scratch.data(), types, B, T, C, NH, ws,
                                ctx, causal, nullptr, nullptr, KV);
        attention_backward_typed(d_gqa.data(), dout.data(), qkv.data(), saved.data(), scratch.data(), types, B, T,
                                 C, NH, ws, ctx, causal, nullptr, KV);
        attention_forward_typed(out_mha.data(), saved.data(), qkv_mha.data(), scratch.data(), types, B, T, C, NH,
                                ws, ctx, causal);
        attention_backward_typed(d_mha.data(), dout.data(), qkv_mha.data(), saved.data(), scratch.data(), types,
                                 B, T, C, NH, ws, ctx, causal);
        std::vector<double> want_d(rows * W, 0.0);
        for (size_t r = 0; r < rows; ++r)
          for (int h = 0; h < NH; ++h)
            for (int d = 0; d < HS; ++d) {
              const float* m = d_mha.data() + r * 3 * C;
              double* g = want_d.data() + r * W;
              g[h * HS + d] = m[h * HS + d];
              g[C + (h / G) * HS + d] += m[C + h * HS + d];
              g[C + KV * HS + (h / G) * HS + d] += m[2 * C + h * HS + d];
            }
        EXPECT_TRUE(all_close(out_gqa, test::to_double(out_mha), Tol{1e-6, 1e-5}, "out"));
        EXPECT_TRUE(all_close(d_gqa, want_d, Tol{1e-5, 1e-5}, "dqkv"));
      }
}

// Grouped heads over bf16 qkv: a key/value head's gradient sums its group's members in fp32 and
// rounds once (a 16-bit output cannot accumulate; Llama's bf16 training found it refused), so it
// matches the fp32 kernel on the same rounded inputs within bf16's rounding.
TEST(Attention, GroupedQueryInBf16SumsTheGroupInFp32) {
  const int B = 2, T = 40, NH = 4, KV = 2, HS = 8, C = NH * HS, W = (NH + 2 * KV) * HS;
  constexpr StorageType BF = StorageType::BF16, F = StorageType::F32;
  Context ctx;
  GemmWorkspace ws(ctx);
  const size_t rows = static_cast<size_t>(B) * T;
  // Inputs already bf16 values, so both runs see the same numbers.
  auto round_bf16 = [](std::vector<float> x) {
    std::vector<uint16_t> b(x.size());
    convert(b.data(), BF, x.data(), F, x.size());
    convert(x.data(), F, b.data(), BF, x.size());
    return x;
  };
  const auto qkv = round_bf16(test::randn(rows * W, 71, 1.0f)), dout = round_bf16(test::randn(rows * C, 72, 1.0f));
  std::vector<float> got;
  std::vector<double> want;
  for (const bool bf16 : {false, true}) {
    const AttentionTypes ty = bf16 ? AttentionTypes{BF, F, BF, BF, ComputeType::BF16, ComputeType::BF16}
                                   : fp32::attention_types();
    const size_t e = bf16 ? 2 : 4;
    std::vector<char> q(rows * W * e), d(rows * C * e), out(rows * C * e), dq(rows * W * e);
    convert(q.data(), ty.qkv, qkv.data(), F, qkv.size());
    convert(d.data(), ty.out, dout.data(), F, dout.size());
    std::vector<char> saved(attention_saved_bytes_typed(B, T, C, NH, ty)),
        scratch(attention_scratch_bytes_typed(B, T, C, NH, ty));
    attention_forward_typed(out.data(), saved.data(), q.data(), scratch.data(), ty, B, T, C, NH, ws, ctx, true,
                            nullptr, nullptr, KV);
    attention_backward_typed(dq.data(), d.data(), q.data(), saved.data(), scratch.data(), ty, B, T, C, NH, ws, ctx,
                             true, nullptr, KV);
    std::vector<float> wide(rows * W);
    convert(wide.data(), F, dq.data(), ty.qkv, wide.size());
    if (bf16)
      got = wide;
    else
      want = test::to_double(wide);
  }
  EXPECT_TRUE(all_close(got, want, Tol{2e-2, 2e-2}, "dqkv"));
}

}  // namespace
}  // namespace mptrain::cpu
