// 16-bit GEMMs: bf16 (and fp16 where this CPU has kernels) operands with fp32 accumulation
// equal the fp32 GEMM of the same values rounded to the 16-bit type (what tensor cores and
// AVX512-BF16/AMX compute), in every transpose combination and with accumulate.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/ops/gemm.h"
#include "common/cpu_fp32.h"
#include "core/dtype.h"
#include "core/rng.h"

namespace mptrain::cpu {
namespace {

struct Shape {
  int M, N, K;
};

template <typename H, typename ToH, typename FromH>
void check_typed(StorageType t, ToH to_h, FromH from_h, Context& ctx) {
  for (Shape s : {Shape{33, 31, 65}, Shape{128, 129, 127}, Shape{1, 64, 7}}) {
    for (int trans = 0; trans < 4; ++trans) {
      const bool ta = trans & 1, tb = trans & 2;
      const size_t na = static_cast<size_t>(s.M) * s.K, nb = static_cast<size_t>(s.K) * s.N;
      std::vector<H> a(na), b(nb);
      std::vector<float> af(na), bf(nb);
      for (size_t i = 0; i < na; ++i) {
        a[i] = to_h(normal01(1, trans, i));
        af[i] = from_h(a[i]);
      }
      for (size_t i = 0; i < nb; ++i) {
        b[i] = to_h(normal01(2, trans, i));
        bf[i] = from_h(b[i]);
      }
      for (bool accumulate : {false, true}) {
        std::vector<float> c(static_cast<size_t>(s.M) * s.N, 0.5f), ref = c;
        GemmLayout la{0, 0, ta ? 1 : s.K, ta ? s.M : 1};
        GemmLayout lb{0, 0, tb ? 1 : s.N, tb ? s.K : 1};
        GemmLayout lc{0, 0, s.N, 1};
        gemm_batched_typed(c.data(), StorageType::F32, lc, a.data(), t, la, b.data(), t, lb, 1, 1, s.M, s.N, s.K,
                           accumulate, ctx);
        gemm(ref.data(), af.data(), bf.data(), s.M, s.N, s.K, ta, tb, accumulate, ctx);
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], ref[i], 1e-4f * (1.0f + std::fabs(ref[i])))
              << storage_name(t) << " M=" << s.M << " N=" << s.N << " K=" << s.K << " trans=" << trans << " i=" << i;
      }
    }
  }
}

// oneDNN's bf16 kernels need AVX-512 (AVX512-BF16 or AMX to be fast); on an AVX2-only CPU it has
// none, and gemm_mixed widens bf16 operands to fp32 instead (GemmMixed's tests run that path).
bool bf16_kernels(Context& ctx) {
  return gemm_supports(StorageType::F32, StorageType::BF16, StorageType::BF16, ctx);
}

TEST(GemmTyped, Bf16MatchesFp32OnRoundedInputs) {
  Context ctx;
  if (!bf16_kernels(ctx)) GTEST_SKIP() << "oneDNN has no bf16 matmul kernel on this CPU (needs AVX-512)";
  check_typed<Bf16>(StorageType::BF16, [](float x) { return f32_to_bf16(x); }, [](Bf16 h) { return bf16_to_f32(h); },
                    ctx);
}

TEST(GemmTyped, Fp16MatchesFp32OnRoundedInputsWhereSupported) {
  Context ctx;
  if (!gemm_supports(StorageType::F32, StorageType::F16, StorageType::F16, ctx))
    GTEST_SKIP() << "oneDNN has no fp16 matmul kernel on this CPU (needs AVX512-FP16)";
  check_typed<Fp16>(StorageType::F16, [](float x) { return f32_to_f16(x); }, [](Fp16 h) { return f16_to_f32(h); },
                    ctx);
}

TEST(GemmTyped, Bf16OutputIsTheRoundedFp32Result) {
  Context ctx;
  if (!bf16_kernels(ctx)) GTEST_SKIP() << "oneDNN has no bf16 matmul kernel on this CPU (needs AVX-512)";
  const int M = 40, N = 24, K = 56;
  std::vector<Bf16> a(M * K), b(K * N), c(M * N);
  std::vector<float> af(M * K), bf(K * N), ref(M * N);
  for (int i = 0; i < M * K; ++i) af[i] = bf16_to_f32(a[i] = f32_to_bf16(normal01(3, 0, i)));
  for (int i = 0; i < K * N; ++i) bf[i] = bf16_to_f32(b[i] = f32_to_bf16(normal01(4, 0, i)));
  gemm_batched_typed(c.data(), StorageType::BF16, GemmLayout{0, 0, N, 1}, a.data(), StorageType::BF16,
                     GemmLayout{0, 0, K, 1}, b.data(), StorageType::BF16, GemmLayout{0, 0, N, 1}, 1, 1, M, N, K, false,
                     ctx);
  gemm(ref.data(), af.data(), bf.data(), M, N, K, false, false, false, ctx);
  for (int i = 0; i < M * N; ++i) {
    // The fp32 sums may differ in their last bits; the bf16 result is within one bf16 ulp.
    ASSERT_NEAR(bf16_to_f32(c[i]), ref[i], std::fabs(ref[i]) * (1.0f / 128) + 1e-6f) << i;
  }
}

}  // namespace
}  // namespace mptrain::cpu
