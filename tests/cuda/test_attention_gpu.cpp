// GPU attention (cuda/attention.h) against the CPU typed op (cpu::attention_forward_typed and
// its masked twin) on the same rounded inputs, every storage type: forward output, saved P and
// dqkv for shapes that straddle warp and tile edges (T 1/31/64/129, HS 6/12/16/64/128, B·NH > 1),
// P exactly 0 above the diagonal and on padded keys, padded keys' k and v get exactly 0
// gradient, an all-padding sequence gives NaN (the documented behaviour), repeated runs are
// bit-identical, argument errors are clear. Also gemm_batched (the strided batched products
// attention is built on) against a per-matrix CPU product, and its plan cache key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cuda/attention.h"
#include "backend/cuda/gemm.h"
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
  int B, T, C, NH;
  int HS() const { return C / NH; }
  size_t btc() const { return static_cast<size_t>(B) * T * C; }
  size_t tt() const { return static_cast<size_t>(B) * NH * T * T; }
  std::string name() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
           " NH=" + std::to_string(NH) + " HS=" + std::to_string(HS());
  }
};

// T 1, 31, 64, 129 (one query, under a warp, a warp multiple, just over a 128 tile) with HS 16
// and 64 (16-byte head copies), 6 and 12 (scalar head copies in some or all types), and HS 128
// (the flash kernel's other head size).
const Shape kShapes[] = {{2, 1, 32, 2},    {2, 31, 64, 1}, {1, 64, 32, 2}, {2, 64, 128, 2}, {2, 129, 48, 3},
                         {1, 129, 128, 2}, {2, 33, 36, 3}, {3, 17, 12, 2}, {2, 65, 256, 2}};

struct Result {
  std::vector<float> y, p, dqkv;
};

// The CPU typed op with every tensor (P and dS included) in T, as the GPU stores them.
template <class T>
Result cpu_run(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout, const int* mask,
               bool causal, ComputeType m) {
  AttentionReference r = cpu_attention<T>(s.B, s.T, s.C, s.NH, qkv, dout, mask, causal, m);
  return Result{std::move(r.y), std::move(r.p), std::move(r.dqkv)};
}

// The GPU op on poisoned outputs, saved state and scratch; mask null = causal op, else masked
// (an empty vector with `masked` = masked op without padding).
template <class T>
Result gpu_run(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout,
               const std::vector<int>* mask, ComputeType m) {
  const StorageType t = cuda::storage_of<T>();
  auto gq = upload<T>(qkv), gd = upload<T>(dout);
  auto y = poisoned<T>(s.btc()), dq = poisoned<T>(qkv.size());
  const size_t saved_bytes = cuda::attention_saved_bytes(s.B, s.T, s.C, s.NH, t);
  EXPECT_EQ(saved_bytes, s.tt() * sizeof(T));
  auto saved = poisoned<T>(saved_bytes / sizeof(T));
  auto scratch = poisoned<char>(cuda::attention_scratch_bytes(s.B, s.T, s.C, s.NH, t));
  cuda::DeviceBuffer<int> gm;
  if (mask && !mask->empty()) gm = cuda::DeviceBuffer<int>(*mask, ctx());
  const auto keys =
      mask ? cuda::AttentionKeys::masked(mask->empty() ? nullptr : gm.data()) : cuda::AttentionKeys::causal();
  cuda::attention_forward<T>(y.data(), saved.data(), gq.data(), keys, scratch.data(), s.B, s.T, s.C, s.NH, m,
                             ctx());
  cuda::attention_backward<T>(dq.data(), gd.data(), gq.data(), saved.data(), keys, scratch.data(), s.B, s.T,
                              s.C, s.NH, m, ctx());
  return Result{download(y), download(saved), download(dq)};
}

std::vector<ComputeType> modes_for(StorageType t) {
  if (t == StorageType::F32) return {ComputeType::F32, ComputeType::TF32};
  return {ComputeType::F32};
}

template <class T>
double tol(ComputeType m) {
  return std::is_same_v<T, float> && m == ComputeType::TF32 ? 1e-3 : tolerance<T>();
}

template <class T>
void make_inputs(const Shape& s, uint64_t seed, std::vector<float>& qkv, std::vector<float>& dout) {
  make_attention_inputs<T>(s.btc(), seed, qkv, dout);
}

template <class T>
class CudaAttention : public ::testing::Test {};
TYPED_TEST_SUITE(CudaAttention, StorageTypes);

TYPED_TEST(CudaAttention, CausalMatchesCpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  for (const Shape& s : kShapes)
    for (ComputeType m : modes_for(cuda::storage_of<T>())) {
      SCOPED_TRACE(s.name() + " " + type_name<T>() + " math=" + compute_name(m));
      std::vector<float> qkv, dout;
      make_inputs<T>(s, 10, qkv, dout);
      const Result g = gpu_run<T>(s, qkv, dout, nullptr, m);
      const Result c = cpu_run<T>(s, qkv, dout, nullptr, true, m);
      EXPECT_LT(rel_err(g.y, c.y), tol<T>(m));
      EXPECT_LT(rel_err(g.p, c.p), tol<T>(m));
      EXPECT_LT(rel_err(g.dqkv, c.dqkv), tol<T>(m));
      // P: exactly 0 above the diagonal, rows sum to 1 (up to T's rounding of each entry).
      size_t nonzero_above = 0, bad_rows = 0;
      for (size_t r = 0; r < static_cast<size_t>(s.B) * s.NH * s.T; ++r) {
        const int t = static_cast<int>(r % s.T);
        double sum = 0.0;
        for (int j = 0; j < s.T; ++j) {
          const float v = g.p[r * s.T + j];
          if (j > t && !(v == 0.0f && !std::signbit(v))) ++nonzero_above;
          sum += v;
        }
        if (!(std::fabs(sum - 1.0) < (std::is_same_v<T, float> ? 1e-5 : 2e-2))) ++bad_rows;
      }
      EXPECT_EQ(nonzero_above, 0u);
      EXPECT_EQ(bad_rows, 0u);
    }
}

// Sequence 0 has no padding; sequence b > 0 has a padded tail and a hole at key 1 (so padded
// queries exist and a padded key sits among real ones).
std::vector<int> padding_mask(const Shape& s) {
  std::vector<int> mask(static_cast<size_t>(s.B) * s.T, 1);
  for (int b = 1; b < s.B; ++b)
    for (int t = 0; t < s.T; ++t)
      if (t == 1 || t >= s.T - s.T / 3 - b) mask[static_cast<size_t>(b) * s.T + t] = 0;
  for (int b = 0; b < s.B; ++b) mask[static_cast<size_t>(b) * s.T] = 1;  // every sequence keeps key 0
  return mask;
}

TYPED_TEST(CudaAttention, MaskedMatchesCpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  for (const Shape& s : kShapes)
    for (ComputeType m : modes_for(cuda::storage_of<T>()))
      for (int padded = 0; padded < 2; ++padded) {
        SCOPED_TRACE(s.name() + " " + type_name<T>() + " math=" + compute_name(m) +
                     (padded ? " padded" : " no mask"));
        std::vector<float> qkv, dout;
        make_inputs<T>(s, 20, qkv, dout);
        const std::vector<int> mask = padded ? padding_mask(s) : std::vector<int>{};
        const Result g = gpu_run<T>(s, qkv, dout, &mask, m);
        const Result c = cpu_run<T>(s, qkv, dout, padded ? mask.data() : nullptr, false, m);
        EXPECT_LT(rel_err(g.y, c.y), tol<T>(m));
        EXPECT_LT(rel_err(g.p, c.p), tol<T>(m));
        EXPECT_LT(rel_err(g.dqkv, c.dqkv), tol<T>(m));
        if (!padded) continue;
        // P exactly 0 on padded keys (every query row, padded queries included); their k and v
        // get exactly 0 gradient.
        size_t bad_p = 0, bad_grad = 0;
        for (int b = 0; b < s.B; ++b)
          for (int j = 0; j < s.T; ++j) {
            if (mask[static_cast<size_t>(b) * s.T + j]) continue;
            for (size_t r = static_cast<size_t>(b) * s.NH * s.T; r < static_cast<size_t>(b + 1) * s.NH * s.T;
                 ++r)
              if (g.p[r * s.T + j] != 0.0f) ++bad_p;
            const size_t row = (static_cast<size_t>(b) * s.T + j) * 3 * s.C;
            for (int c2 = s.C; c2 < 3 * s.C; ++c2)
              if (g.dqkv[row + c2] != 0.0f) ++bad_grad;
          }
        EXPECT_EQ(bad_p, 0u);
        EXPECT_EQ(bad_grad, 0u);
      }
}

TYPED_TEST(CudaAttention, AllPaddingSequenceGivesNaN) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const Shape s{2, 9, 32, 2};
  std::vector<float> qkv, dout;
  make_inputs<T>(s, 30, qkv, dout);
  std::vector<int> mask(static_cast<size_t>(s.B) * s.T, 1);
  for (int t = 0; t < s.T; ++t) mask[static_cast<size_t>(s.T) + t] = 0;  // sequence 1: no real key
  const Result g = gpu_run<T>(s, qkv, dout, &mask, ComputeType::F32);
  const size_t half = s.btc() / 2;
  for (size_t i = 0; i < half; ++i) ASSERT_TRUE(std::isfinite(g.y[i])) << i;
  for (size_t i = half; i < s.btc(); ++i) ASSERT_TRUE(std::isnan(g.y[i])) << i;
}

TYPED_TEST(CudaAttention, RepeatedRunsAreBitIdentical) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const Shape s{2, 129, 128, 2};
  std::vector<float> qkv, dout;
  make_inputs<T>(s, 40, qkv, dout);
  const std::vector<int> mask = padding_mask(s);
  for (int masked = 0; masked < 2; ++masked) {
    SCOPED_TRACE(masked ? "masked" : "causal");
    const Result a = gpu_run<T>(s, qkv, dout, masked ? &mask : nullptr, ComputeType::F32);
    const Result b = gpu_run<T>(s, qkv, dout, masked ? &mask : nullptr, ComputeType::F32);
    EXPECT_EQ(0, std::memcmp(a.y.data(), b.y.data(), a.y.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(a.p.data(), b.p.data(), a.p.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(a.dqkv.data(), b.dqkv.data(), a.dqkv.size() * sizeof(float)));
  }
}

void expect_error(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

// The size functions need no GPU: this test runs everywhere.
TEST(CudaAttentionSizes, SizesAndBadSizes) {
  EXPECT_EQ(cuda::attention_saved_bytes(2, 5, 12, 3, StorageType::BF16), 2u * 3 * 5 * 5 * 2);
  EXPECT_EQ(cuda::attention_saved_bytes(2, 5, 12, 3, StorageType::F32), 2u * 3 * 5 * 5 * 4);
  // At least q, k, v, dY, dq, dk, dv (7 × B·T·C), fp32 dP and dS (B·NH·T·T each).
  const size_t btc = 2 * 5 * 12, tt = 2 * 3 * 5 * 5;
  EXPECT_GE(cuda::attention_scratch_bytes(2, 5, 12, 3, StorageType::BF16), 7 * btc * 2 + tt * (4 + 2));
  EXPECT_GE(cuda::attention_scratch_bytes(2, 5, 12, 3, StorageType::F32), 7 * btc * 4 + tt * (4 + 4));
  expect_error([] { cuda::attention_saved_bytes(2, 5, 10, 3, StorageType::F32); },
               "[attention_saved_bytes] C must be a multiple of NH (C % NH = 1)");
  expect_error([] { cuda::attention_scratch_bytes(0, 5, 12, 3, StorageType::F32); },
               "[attention_scratch_bytes] sizes must be positive: B=0 T=5 C=12 NH=3");
}

TEST(CudaAttentionArgs, BadArgumentsAreClearErrors) {
  SKIP_WITHOUT_GPU();
  cuda::DeviceBuffer<float> a(4096);
  float* p = a.data();
  const auto causal = cuda::AttentionKeys::causal(), masked = cuda::AttentionKeys::masked(nullptr);
  const auto f32 = ComputeType::F32;
  expect_error([&] { cuda::attention_forward<float>(p, p, p, causal, p, 1, 4, 10, 3, f32, ctx()); },
               "[attention_forward] C must be a multiple of NH");
  expect_error([&] { cuda::attention_backward<float>(p, p, p, p, causal, p, 1, -4, 12, 3, f32, ctx()); },
               "[attention_backward] sizes must be positive");
  expect_error([&] { cuda::attention_forward<float>(p, nullptr, p, causal, p, 1, 4, 12, 3, f32, ctx()); },
               "[attention_forward] null pointer");
  expect_error([&] { cuda::attention_forward<float>(p, p, p, masked, nullptr, 1, 4, 12, 3, f32, ctx()); },
               "[attention_forward] null scratch");
  expect_error([&] { cuda::attention_backward<float>(p, p, p, p, masked, p + 1, 1, 4, 12, 3, f32, ctx()); },
               "[attention_backward] scratch must be 16-byte aligned");
  expect_error(
      [&] {
        const auto bad_mask =
            cuda::AttentionKeys::masked(reinterpret_cast<const int*>(reinterpret_cast<char*>(p) + 2));
        cuda::attention_forward<float>(p, p, p, bad_mask, p, 1, 4, 12, 3, f32, ctx());
      },
      "[attention_forward] key_mask is not aligned to int");
  cuda::DeviceBuffer<Bf16> h(64);
  expect_error(
      [&] {
        cuda::attention_forward<Bf16>(h.data(), reinterpret_cast<char*>(h.data()) + 1, h.data(), causal, p, 1,
                                      2, 4, 2, f32, ctx());
      },
      "[attention_forward] a tensor pointer is not aligned");
}

// --- gemm_batched ---------------------------------------------------------------------------

template <class T>
class CudaAttentionGemmBatched : public ::testing::Test {};
TYPED_TEST_SUITE(CudaAttentionGemmBatched, StorageTypes);

// Every transpose pair, fp32 and 16-bit C, strides with a gap between matrices (so a stride
// mistake reads the wrong data), against cpu::gemm per matrix on the rounded inputs.
TYPED_TEST(CudaAttentionGemmBatched, MatchesPerMatrixCpuProducts) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const StorageType t = cuda::storage_of<T>();
  const int count = 3, M = 33, N = 31, K = 17;
  const int64_t sa = M * K + 5, sb = K * N + 3, sc = M * N + 7;
  std::vector<float> a = rounded<T>(randn(count * sa, 51)), b = rounded<T>(randn(count * sb, 52));
  auto ga = upload<T>(a), gb = upload<T>(b);
  for (int fp32_c = 0; fp32_c < 2; ++fp32_c)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        SCOPED_TRACE(type_name<T>() + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                     " fp32 C=" + std::to_string(fp32_c));
        std::vector<float> got;
        if (fp32_c) {
          auto gc = poisoned<float>(count * sc);
          cuda::gemm_batched(gc.data(), StorageType::F32, ga.data(), gb.data(), t, M, N, K, ta, tb, false,
                             ComputeType::F32, {count, sa, sb, sc}, ctx());
          got = download(gc);
        } else {
          auto gc = poisoned<T>(count * sc);
          cuda::gemm_batched(gc.data(), t, ga.data(), gb.data(), t, M, N, K, ta, tb, false, ComputeType::F32,
                             {count, sa, sb, sc}, ctx());
          got = download(gc);
        }
        for (int i = 0; i < count; ++i) {
          std::vector<float> ref(static_cast<size_t>(M) * N);
          cpu::gemm(ref.data(), a.data() + i * sa, b.data() + i * sb, M, N, K, ta, tb, false, cpu_ctx());
          if (!fp32_c) ref = rounded<T>(ref);
          const std::vector<float> part(got.begin() + i * sc, got.begin() + i * sc + M * N);
          EXPECT_LT(rel_err(part, ref), tolerance<T>()) << "matrix " << i;
        }
      }
}

TEST(CudaAttentionGemmBatchedPlans, BatchIsPartOfThePlanKey) {
  SKIP_WITHOUT_GPU();
  cuda::DeviceBuffer<float> a(4096), c(4096);
  a.zero(ctx());
  auto run = [&](int count, int64_t stride) {
    cuda::gemm_batched(c.data(), StorageType::F32, a.data(), a.data(), StorageType::F32, 8, 8, 8, false,
                       false, false, ComputeType::F32, {count, stride, stride, stride}, ctx());
  };
  run(2, 64);
  const size_t before = cuda::gemm_plan_count(ctx());
  run(2, 64);
  EXPECT_EQ(cuda::gemm_plan_count(ctx()), before);
  run(3, 64);
  EXPECT_EQ(cuda::gemm_plan_count(ctx()), before + 1);
  run(3, 128);
  EXPECT_EQ(cuda::gemm_plan_count(ctx()), before + 2);
  expect_error([&] { run(2, -64); }, "[gemm] negative batch count or stride");
}

}  // namespace
}  // namespace mptrain
