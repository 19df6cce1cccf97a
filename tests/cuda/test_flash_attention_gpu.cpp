// Flash attention (cuda/flash_attention.h) against three references on the same rounded inputs:
// the naive GPU path (cuda/attention.h, same T), the CPU typed op (cpu::attention_*_typed) and a
// double-precision host computation of the log-sum-exp. Forward output, lse and each third of
// dqkv (dq, dk, dv separately), bf16 and fp16, causal and key-masked (sequences padded at the
// end by different amounts), T 1/63/64/65/200/1024 (one query, tile edges ±1, several tiles with
// a ragged last one, GPT-2's length), HS 64 and 128, B·NH > 1. Outputs, lse and scratch are
// NaN-poisoned first, so an element no kernel wrote fails. Also: padded keys get exactly 0 dk
// and dv, an all-padding sequence is NaN without touching its neighbour, repeated runs are
// bit-identical, argument errors are clear, and the size functions (no GPU needed: they run
// everywhere).
//
// Tolerance 1e-2 (relative norm) for bf16 and fp16, the backend's 16-bit tolerance: the flash
// and the naive path round different intermediates to T (flash rounds P, then dS, as product
// operands and O once; the naive path rounds P, dS and every head-major product), each a
// relative perturbation of at most 2^-9 (bf16) per element; the measured norm error of such
// paths sits near 3e-3 in bf16 and well under 1e-3 in fp16. lse is fp32 from fp32 scores of
// exact 16-bit products: within 1e-3 absolute of the double computation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cuda/attention.h"
#include "backend/cuda/flash_attention.h"
#include "backend/ops/attention.h"
#include "backend/ops/convert.h"
#include "backend/ops/gemm.h"
#include "common/cpu_fp32.h"
#include "core/error.h"
#include "cuda/attention_test_util.h"
#include "cuda/gpu_test_util.h"

namespace mptrain {
namespace {

using namespace gputest;

struct Shape {
  int B, T, NH, HS;
  int C() const { return NH * HS; }
  size_t btc() const { return static_cast<size_t>(B) * T * C(); }
  size_t bht() const { return static_cast<size_t>(B) * NH * T; }
  std::string name() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
           " HS=" + std::to_string(HS);
  }
};

const Shape kShapes[] = {{2, 1, 2, 64},    {1, 63, 3, 64},   {2, 64, 2, 128},
                         {2, 65, 2, 64},   {1, 65, 2, 128},  {2, 200, 3, 64},
                         {1, 200, 2, 128}, {1, 1024, 2, 64}, {1, 1024, 2, 128}};

struct Result {
  std::vector<float> y, lse, dqkv;
};

// Real lengths per sequence: sequence 1 is whole, the others lose a growing tail (T=1024 loses
// whole 64-key tiles, which the kernels skip); at least one real key remains, or the row would be
// the documented NaN.
std::vector<int> padding_mask(const Shape& s) {
  std::vector<int> m(static_cast<size_t>(s.B) * s.T, 0);
  for (int b = 0; b < s.B; ++b) {
    const int real = b == 1 ? s.T : std::max(1, s.T - (b + 1) * (s.T / 4 + 1));
    for (int t = 0; t < real; ++t) m[static_cast<size_t>(b) * s.T + t] = 1;
  }
  return m;
}

// The CPU typed op with every tensor in T (out and dqkv only).
template <class T>
Result cpu_run(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout, const int* mask,
               bool causal) {
  AttentionReference r = cpu_attention<T>(s.B, s.T, s.C(), s.NH, qkv, dout, mask, causal, ComputeType::F32);
  return Result{std::move(r.y), {}, std::move(r.dqkv)};
}

// The naive GPU path (out and dqkv).
template <class T>
Result naive_run(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout,
                 const int* mask_dev, bool causal) {
  const StorageType t = cuda::storage_of<T>();
  const int B = s.B, Tn = s.T, C = s.C(), NH = s.NH;
  auto gq = upload<T>(qkv), gd = upload<T>(dout);
  auto y = poisoned<T>(s.btc()), dq = poisoned<T>(qkv.size());
  auto saved = poisoned<char>(cuda::attention_saved_bytes(B, Tn, C, NH, t));
  auto scratch = poisoned<char>(cuda::attention_scratch_bytes(B, Tn, C, NH, t));
  const auto m = ComputeType::F32;
  const auto keys = causal ? cuda::AttentionKeys::causal() : cuda::AttentionKeys::masked(mask_dev);
  cuda::attention_forward<T>(y.data(), saved.data(), gq.data(), keys, scratch.data(), B, Tn, C, NH, m, ctx());
  cuda::attention_backward<T>(dq.data(), gd.data(), gq.data(), saved.data(), keys, scratch.data(), B, Tn, C,
                              NH, m, ctx());
  return Result{download(y), {}, download(dq)};
}

// The flash path on poisoned out, lse, scratch and dqkv.
template <class T>
Result flash_run(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout,
                 const int* mask_dev, bool causal) {
  const int B = s.B, Tn = s.T, C = s.C(), NH = s.NH;
  auto gq = upload<T>(qkv), gd = upload<T>(dout);
  auto y = poisoned<T>(s.btc()), dq = poisoned<T>(qkv.size());
  const size_t saved_bytes = cuda::flash_attention_saved_bytes(B, Tn, NH);
  EXPECT_EQ(saved_bytes, s.bht() * sizeof(float));
  auto lse = poisoned<float>(saved_bytes / sizeof(float));
  auto scratch = poisoned<char>(cuda::flash_attention_scratch_bytes(B, Tn, NH));
  const auto keys = causal ? cuda::AttentionKeys::causal() : cuda::AttentionKeys::masked(mask_dev);
  cuda::flash_attention_forward<T>(y.data(), lse.data(), gq.data(), keys, B, Tn, C, NH, ctx());
  cuda::flash_attention_backward<T>(dq.data(), gd.data(), gq.data(), y.data(), lse.data(), keys,
                                    scratch.data(), B, Tn, C, NH, ctx());
  ctx().synchronize();
  return Result{download(y), download(lse), download(dq)};
}

// log Σ_j exp(scale·q_i·k_j) over the keys row i attends to, in double, [B,NH,T].
std::vector<float> host_lse(const Shape& s, const std::vector<float>& qkv, const int* mask, bool causal) {
  const int C = s.C();
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.HS));
  std::vector<float> out(s.bht());
  std::vector<double> sc(s.T);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.NH; ++h)
      for (int i = 0; i < s.T; ++i) {
        const float* q = &qkv[(static_cast<size_t>(b) * s.T + i) * 3 * C + h * s.HS];
        double mx = -INFINITY;
        const int n = causal ? i + 1 : s.T;
        for (int j = 0; j < n; ++j) {
          sc[j] = -INFINITY;
          if (mask && !mask[static_cast<size_t>(b) * s.T + j]) continue;
          const float* k = &qkv[(static_cast<size_t>(b) * s.T + j) * 3 * C + C + h * s.HS];
          double dot = 0.0;
          for (int d = 0; d < s.HS; ++d) dot += static_cast<double>(q[d]) * k[d];
          sc[j] = scale * dot;
          mx = std::max(mx, sc[j]);
        }
        double sum = 0.0;
        for (int j = 0; j < n; ++j)
          if (sc[j] != -INFINITY) sum += std::exp(sc[j] - mx);
        out[(static_cast<size_t>(b) * s.NH + h) * s.T + i] = static_cast<float>(mx + std::log(sum));
      }
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return m;
}

// One third (0 = dq, 1 = dk, 2 = dv) of dqkv [B,T,3C].
std::vector<float> part(const std::vector<float>& dqkv, const Shape& s, int which) {
  const size_t C = static_cast<size_t>(s.C()), rows = static_cast<size_t>(s.B) * s.T;
  std::vector<float> r(rows * C);
  for (size_t t = 0; t < rows; ++t)
    std::copy_n(dqkv.begin() + static_cast<std::ptrdiff_t>(t * 3 * C + which * C), C,
                r.begin() + static_cast<std::ptrdiff_t>(t * C));
  return r;
}

// Scores of a few units (q, k ~ 0.8·N(0,1), HS terms, scale 1/sqrt(HS)): neither flat nor one-hot.
template <class T>
void make_inputs(const Shape& s, uint64_t seed, std::vector<float>& qkv, std::vector<float>& dout) {
  make_attention_inputs<T>(s.btc(), seed, qkv, dout);
}

template <class T>
void check_against_references(const Shape& s, bool causal, bool with_mask, uint64_t seed) {
  std::vector<float> qkv, dout;
  make_inputs<T>(s, seed, qkv, dout);
  std::vector<int> mask;
  cuda::DeviceBuffer<int> gmask;
  if (with_mask) {
    mask = padding_mask(s);
    gmask = cuda::DeviceBuffer<int>(mask, ctx());
  }
  const int* mask_host = with_mask ? mask.data() : nullptr;
  const int* mask_dev = with_mask ? gmask.data() : nullptr;

  const Result f = flash_run<T>(s, qkv, dout, mask_dev, causal);
  const Result n = naive_run<T>(s, qkv, dout, mask_dev, causal);
  const Result c = cpu_run<T>(s, qkv, dout, mask_host, causal);
  const double tol = tolerance<T>();
  EXPECT_LT(rel_err(f.y, n.y), tol) << "out vs naive GPU";
  EXPECT_LT(rel_err(f.y, c.y), tol) << "out vs CPU";
  EXPECT_LT(max_abs_diff(f.lse, host_lse(s, qkv, mask_host, causal)), 1e-3) << "lse vs host (double)";
  const char* names[3] = {"dq", "dk", "dv"};
  for (int w = 0; w < 3; ++w) {
    const std::vector<float> got = part(f.dqkv, s, w);
    EXPECT_LT(rel_err(got, part(n.dqkv, s, w)), tol) << names[w] << " vs naive GPU";
    EXPECT_LT(rel_err(got, part(c.dqkv, s, w)), tol) << names[w] << " vs CPU";
  }
  if (with_mask) {  // padded keys: exactly 0 dk and dv (P is exactly 0 on them)
    const size_t C = static_cast<size_t>(s.C());
    size_t nonzero = 0;
    for (size_t bt = 0; bt < mask.size(); ++bt)
      if (!mask[bt])
        for (size_t j = C; j < 3 * C; ++j) nonzero += f.dqkv[bt * 3 * C + j] != 0.0f;
    EXPECT_EQ(nonzero, 0u) << "dk/dv elements of padded keys that are not exactly 0";
  }
}

void expect_flash_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[flash attention]"), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "' in: " << msg;
  }
}

template <class T>
class CudaFlashAttention : public ::testing::Test {};
using Types16 = ::testing::Types<Bf16, Fp16>;
TYPED_TEST_SUITE(CudaFlashAttention, Types16);

TYPED_TEST(CudaFlashAttention, CausalMatchesNaiveCpuAndHostLse) {
  SKIP_WITHOUT_GPU();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.name() + " " + type_name<TypeParam>() + " causal");
    check_against_references<TypeParam>(s, true, false, 100 + s.T);
  }
}

TYPED_TEST(CudaFlashAttention, MaskedMatchesNaiveCpuAndHostLse) {
  SKIP_WITHOUT_GPU();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.name() + " " + type_name<TypeParam>() + " key-masked");
    check_against_references<TypeParam>(s, false, true, 200 + s.T);
  }
}

TYPED_TEST(CudaFlashAttention, UnmaskedBidirectionalMatchesNaive) {
  SKIP_WITHOUT_GPU();
  for (const Shape& s : {Shape{2, 65, 2, 64}, Shape{1, 200, 2, 128}}) {
    SCOPED_TRACE(s.name() + " " + type_name<TypeParam>() + " null mask");
    check_against_references<TypeParam>(s, false, false, 300 + s.T);
  }
}

TYPED_TEST(CudaFlashAttention, RepeatedRunsAreBitIdentical) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const Shape s{2, 200, 3, 64};
  std::vector<float> qkv, dout;
  make_inputs<T>(s, 7, qkv, dout);
  const std::vector<int> mask = padding_mask(s);
  cuda::DeviceBuffer<int> gmask(mask, ctx());
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "key-masked");
    const int* m = causal ? nullptr : gmask.data();
    const Result a = flash_run<T>(s, qkv, dout, m, causal), b = flash_run<T>(s, qkv, dout, m, causal);
    EXPECT_EQ(0, std::memcmp(a.y.data(), b.y.data(), a.y.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(a.dqkv.data(), b.dqkv.data(), a.dqkv.size() * sizeof(float)));
    EXPECT_TRUE(std::all_of(a.y.begin(), a.y.end(), [](float x) { return std::isfinite(x); }));
    EXPECT_TRUE(std::all_of(a.dqkv.begin(), a.dqkv.end(), [](float x) { return std::isfinite(x); }));
  }
}

// A sequence with no real key gives NaN outputs (documented, as the naive path; NaN is also the
// poison, so this checks the launch survives it and the other sequence stays finite).
TYPED_TEST(CudaFlashAttention, AllPaddingSequenceIsNaNOthersFinite) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const Shape s{2, 70, 2, 64};
  std::vector<float> qkv, dout;
  make_inputs<T>(s, 11, qkv, dout);
  std::vector<int> mask(static_cast<size_t>(s.B) * s.T, 1);
  std::fill(mask.begin() + s.T, mask.end(), 0);
  cuda::DeviceBuffer<int> gmask(mask, ctx());
  const Result r = flash_run<T>(s, qkv, dout, gmask.data(), false);
  const size_t half = r.y.size() / 2;
  EXPECT_TRUE(std::all_of(r.y.begin(), r.y.begin() + static_cast<std::ptrdiff_t>(half),
                          [](float x) { return std::isfinite(x); }));
  EXPECT_TRUE(std::all_of(r.y.begin() + static_cast<std::ptrdiff_t>(half), r.y.end(),
                          [](float x) { return std::isnan(x); }));
}

TEST(CudaFlashAttentionArgs, ClearErrors) {
  SKIP_WITHOUT_GPU();
  const int B = 2, Tn = 8, C = 128, NH = 2;
  cuda::DeviceBuffer<Bf16> qkv(3 * B * Tn * C + 8), out(B * Tn * C + 8), dout(B * Tn * C),
      dqkv(3 * B * Tn * C);
  cuda::DeviceBuffer<float> lse(B * NH * Tn), scratch(B * NH * Tn);
  cuda::DeviceBuffer<float> fqkv(3 * B * Tn * C), fout(B * Tn * C);
  auto& c = ctx();
  const auto causal = cuda::AttentionKeys::causal(), masked = cuda::AttentionKeys::masked(nullptr);
  expect_flash_error(
      [&] {
        cuda::flash_attention_forward<Bf16>(out.data(), lse.data(), qkv.data(), causal, B, Tn, 96, 2, c);
      },
      "head size");  // HS 48
  expect_flash_error(
      [&] {
        cuda::flash_attention_forward<Bf16>(out.data(), lse.data(), qkv.data(), causal, B, Tn, 130, 4, c);
      },
      "multiple of NH");
  expect_flash_error(
      [&] {
        cuda::flash_attention_forward<float>(fout.data(), lse.data(), fqkv.data(), causal, B, Tn, C, NH, c);
      },
      "fp32");
  expect_flash_error(
      [&] {
        cuda::flash_attention_forward<Bf16>(out.data(), lse.data(), qkv.data() + 1, causal, B, Tn, C, NH, c);
      },
      "16-byte aligned");
  expect_flash_error(
      [&] {
        cuda::flash_attention_forward<Bf16>(out.data() + 4, lse.data(), qkv.data(), causal, B, Tn, C, NH, c);
      },
      "16-byte aligned");
  expect_flash_error(
      [&] { cuda::flash_attention_forward<Bf16>(out.data(), nullptr, qkv.data(), causal, B, Tn, C, NH, c); },
      "null pointer");
  expect_flash_error(
      [&] {
        cuda::flash_attention_forward<Bf16>(out.data(), lse.data(), qkv.data(), masked, 0, Tn, C, NH, c);
      },
      "positive");
  expect_flash_error(
      [&] {
        cuda::flash_attention_backward<Bf16>(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(),
                                             causal, nullptr, B, Tn, C, NH, c);
      },
      "null pointer");
  expect_flash_error(
      [&] {
        cuda::flash_attention_backward<Bf16>(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(),
                                             masked, scratch.data(), B, Tn, 192, NH, c);
      },
      "head size");  // HS 96
}

// No GPU needed: the support predicate and the byte counts.
TEST(FlashAttentionSizes, SupportAndBytes) {
  EXPECT_TRUE(cuda::flash_attention_supported(768, 12, StorageType::BF16));   // GPT-2 / BERT base, HS 64
  EXPECT_TRUE(cuda::flash_attention_supported(1024, 8, StorageType::F16));    // HS 128
  EXPECT_FALSE(cuda::flash_attention_supported(768, 12, StorageType::F32));   // fp32: naive path
  EXPECT_TRUE(cuda::flash_attention_supported(1600, 25, StorageType::BF16));  // GPT-2 XL, HS 64
  EXPECT_FALSE(cuda::flash_attention_supported(96, 3, StorageType::BF16));    // HS 32
  EXPECT_FALSE(cuda::flash_attention_supported(100, 3, StorageType::BF16));   // C % NH
  EXPECT_FALSE(cuda::flash_attention_supported(0, 0, StorageType::BF16));
  EXPECT_EQ(cuda::flash_attention_saved_bytes(8, 1024, 12), size_t{8} * 12 * 1024 * 4);
  EXPECT_EQ(cuda::flash_attention_scratch_bytes(3, 5, 7), size_t{3} * 5 * 7 * 4);
  try {
    (void)cuda::flash_attention_saved_bytes(0, 4, 2);
    ADD_FAILURE() << "no error for B = 0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[flash attention]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mptrain
