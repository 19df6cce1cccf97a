// gemm (all four transpose combinations, accumulate on and off), gemm_batched on strided views,
// and the linear layer built on them, against plain float64 references.
#include <gtest/gtest.h>

#include <string>

#include "backend/cpu/context.h"
#include "backend/ops/gemm.h"
#include "common/cpu_fp32.h"
#include "core/error.h"
#include "op_test_util.h"

namespace mptrain::cpu {
namespace {

using test::all_close;
using test::Guarded;
using test::Tol;

// C[m,n] (+)= Σ_k op(A)[m,k]·op(B)[k,n], storage as documented in gemm.h.
std::vector<double> ref_gemm(const std::vector<float>& a, const std::vector<float>& b,
                             const std::vector<float>& c0, int M, int N, int K, bool ta, bool tb, bool acc) {
  std::vector<double> c(static_cast<size_t>(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = acc ? c0[static_cast<size_t>(m) * N + n] : 0.0;
      for (int k = 0; k < K; ++k) {
        double av = ta ? a[static_cast<size_t>(k) * M + m] : a[static_cast<size_t>(m) * K + k];
        double bv = tb ? b[static_cast<size_t>(n) * K + k] : b[static_cast<size_t>(k) * N + n];
        s += av * bv;
      }
      c[static_cast<size_t>(m) * N + n] = s;
    }
  return c;
}

struct GemmCase {
  int M, N, K;
  Tol tol;
};

// Sizes straddle the 16-float vector width and oneDNN's blocking; fp32 sums of K products of
// N(0,1) values have errors ~1e-6·sqrt(K), well inside the tolerance.
const GemmCase kGemmCases[] = {
    {1, 1, 1, {1e-5, 1e-5}},    {31, 33, 32, {1e-4, 1e-5}},    {32, 31, 33, {1e-4, 1e-5}},
    {33, 32, 31, {1e-4, 1e-5}}, {127, 129, 128, {1e-4, 1e-5}}, {129, 127, 33, {1e-4, 1e-5}},
    {7, 260, 64, {1e-4, 1e-5}}, {64, 8, 1, {1e-5, 1e-5}},      {1, 129, 260, {2e-4, 1e-5}},
};

TEST(Gemm, AllTransposesAndAccumulate) {
  Context ctx;
  uint64_t seed = 100;
  for (const GemmCase& gc : kGemmCases) {
    for (int mode = 0; mode < 8; ++mode) {
      const bool ta = mode & 1, tb = mode & 2, acc = mode & 4;
      const size_t MN = static_cast<size_t>(gc.M) * gc.N;
      auto a = test::randn(static_cast<size_t>(gc.M) * gc.K, ++seed);
      auto b = test::randn(static_cast<size_t>(gc.K) * gc.N, ++seed);
      auto c0 = test::randn(MN, ++seed);
      Guarded c = acc ? Guarded(c0) : Guarded(MN);  // poisoned unless accumulating
      gemm(c.data(), a.data(), b.data(), gc.M, gc.N, gc.K, ta, tb, acc, ctx);
      const std::string what = "gemm M=" + std::to_string(gc.M) + " N=" + std::to_string(gc.N) +
                               " K=" + std::to_string(gc.K) + " ta=" + std::to_string(ta) +
                               " tb=" + std::to_string(tb) + " acc=" + std::to_string(acc);
      EXPECT_TRUE(all_close(c.values(), ref_gemm(a, b, c0, gc.M, gc.N, gc.K, ta, tb, acc), gc.tol, what));
      EXPECT_TRUE(c.guards_intact()) << what;
    }
  }
}

TEST(Gemm, CachedPrimitiveGivesIdenticalResults) {
  Context ctx;
  const int M = 65, N = 47, K = 129;
  auto a = test::randn(static_cast<size_t>(M) * K, 1), b = test::randn(static_cast<size_t>(K) * N, 2);
  std::vector<float> c1(static_cast<size_t>(M) * N), c2(c1.size());
  gemm(c1.data(), a.data(), b.data(), M, N, K, false, true, false, ctx);
  gemm(c2.data(), a.data(), b.data(), M, N, K, false, true, false, ctx);  // from the cache
  EXPECT_TRUE(test::bit_identical(c1, c2, "gemm repeated"));
}

TEST(Gemm, EmptySizes) {
  Context ctx;
  std::vector<float> a(12, 1.0f), b(12, 1.0f);
  std::vector<float> c(12, 5.0f);
  gemm(c.data(), a.data(), b.data(), 3, 4, 0, false, false, true, ctx);  // K = 0, += nothing
  for (float x : c) EXPECT_EQ(x, 5.0f);
  gemm(c.data(), a.data(), b.data(), 3, 4, 0, false, false, false, ctx);  // K = 0, = 0
  for (float x : c) EXPECT_EQ(x, 0.0f);
  gemm(c.data(), a.data(), b.data(), 0, 4, 3, false, false, false, ctx);  // no rows: nothing to do
}

TEST(Gemm, RejectsNegativeSizes) {
  Context ctx;
  float x = 0.0f;
  try {
    gemm(&x, &x, &x, -1, 1, 1, false, false, false, ctx);
    FAIL() << "expected mptrain::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[gemm]"), std::string::npos) << e.what();
  }
}

TEST(Gemm, LibraryFailureBecomesLibraryError) {
  Context ctx;
  float x = 0.0f;
  // A negative stride is rejected by oneDNN when the memory descriptor is built.
  GemmLayout bad{0, 0, -4, 1};
  EXPECT_THROW(gemm_batched(&x, bad, &x, bad, &x, bad, 1, 1, 2, 2, 2, false, ctx), LibraryError);
}

// Heads of a packed [nb0, T, 3·W] tensor, as attention uses them: A is the first third of each
// row, B^T the second third (transposed through strides), C is written with a row stride larger
// than N, and the gaps between its rows must stay untouched.
TEST(Gemm, BatchedStridedViews) {
  Context ctx;
  const int nb0 = 2, nb1 = 3, T = 37, HS = 17, W = nb1 * HS, ldc = 45;
  const size_t packed = static_cast<size_t>(nb0) * T * 3 * W;
  auto src = test::randn(packed, 7);
  const int M = T, N = T - 3, K = HS;
  const size_t c_floats = static_cast<size_t>(nb0) * nb1 * M * ldc;
  for (bool acc : {false, true}) {
    auto c0 = test::randn(c_floats, 8);
    Guarded c(c0);
    if (!acc)  // poison only the elements the product must write; gaps keep their values
      for (int i = 0; i < nb0 * nb1; ++i)
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < N; ++n) c.data()[(static_cast<size_t>(i) * M + m) * ldc + n] = test::kPoison;
    GemmLayout la{static_cast<std::int64_t>(T) * 3 * W, HS, 3 * W, 1};
    GemmLayout lb{static_cast<std::int64_t>(T) * 3 * W, HS, 1, 3 * W};
    GemmLayout lc{static_cast<std::int64_t>(nb1) * M * ldc, static_cast<std::int64_t>(M) * ldc, ldc, 1};
    gemm_batched(c.data(), lc, src.data(), la, src.data() + W, lb, nb0, nb1, M, N, K, acc, ctx);
    std::vector<double> ref(c0.begin(), c0.end());
    for (int i = 0; i < nb0; ++i)
      for (int j = 0; j < nb1; ++j)
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < N; ++n) {
            double s =
                acc ? c0[static_cast<size_t>(i * nb1 + j) * M * ldc + static_cast<size_t>(m) * ldc + n] : 0.0;
            for (int k = 0; k < K; ++k) {
              const size_t q = (static_cast<size_t>(i) * T + m) * 3 * W + static_cast<size_t>(j) * HS + k;
              const size_t kk =
                  (static_cast<size_t>(i) * T + n) * 3 * W + W + static_cast<size_t>(j) * HS + k;
              s += static_cast<double>(src[q]) * src[kk];
            }
            ref[static_cast<size_t>(i * nb1 + j) * M * ldc + static_cast<size_t>(m) * ldc + n] = s;
          }
    EXPECT_TRUE(all_close(c.values(), ref, {1e-4, 1e-5}, acc ? "batched, accumulate" : "batched"));
    EXPECT_TRUE(c.guards_intact());
  }
}

// --- the linear layer --------------------------------------------------------

struct LinearCase {
  int N, C, OC;
  Tol tol;
};
const LinearCase kLinearCases[] = {{1, 31, 33, {1e-4, 1e-5}},
                                   {7, 33, 129, {1e-4, 1e-5}},
                                   {64, 128, 96, {1e-4, 1e-5}},
                                   {33, 127, 260, {2e-4, 1e-5}}};

TEST(Matmul, ForwardWithAndWithoutBias) {
  Context ctx;
  uint64_t seed = 300;
  for (const LinearCase& lc : kLinearCases) {
    for (bool with_bias : {true, false}) {
      const size_t NO = static_cast<size_t>(lc.N) * lc.OC;
      auto inp = test::randn(static_cast<size_t>(lc.N) * lc.C, ++seed);
      auto w = test::randn(static_cast<size_t>(lc.C) * lc.OC, ++seed, 0.1f);
      auto bias = test::randn(lc.OC, ++seed);
      Guarded out(NO);
      matmul_forward(out.data(), inp.data(), w.data(), with_bias ? bias.data() : nullptr, lc.N, lc.C, lc.OC,
                     ctx);
      std::vector<double> ref(NO);
      for (int n = 0; n < lc.N; ++n)
        for (int o = 0; o < lc.OC; ++o) {
          double s = with_bias ? bias[o] : 0.0;
          for (int c = 0; c < lc.C; ++c)
            s += static_cast<double>(inp[static_cast<size_t>(n) * lc.C + c]) *
                 w[static_cast<size_t>(c) * lc.OC + o];
          ref[static_cast<size_t>(n) * lc.OC + o] = s;
        }
      const std::string what = "matmul_forward N=" + std::to_string(lc.N) + " C=" + std::to_string(lc.C) +
                               " OC=" + std::to_string(lc.OC) + (with_bias ? " bias" : " no bias");
      EXPECT_TRUE(all_close(out.values(), ref, lc.tol, what));
      EXPECT_TRUE(out.guards_intact()) << what;
    }
  }
}

TEST(Matmul, BackwardAccumulates) {
  Context ctx;
  uint64_t seed = 400;
  for (const LinearCase& lc : kLinearCases) {
    for (bool with_bias : {true, false}) {
      const int N = lc.N, C = lc.C, OC = lc.OC;
      auto inp = test::randn(static_cast<size_t>(N) * C, ++seed);
      auto w = test::randn(static_cast<size_t>(C) * OC, ++seed, 0.1f);
      auto dout = test::randn(static_cast<size_t>(N) * OC, ++seed);
      // Gradients arrive pre-filled: the op must add to them.
      auto dinp0 = test::randn(static_cast<size_t>(N) * C, ++seed);
      auto dw0 = test::randn(static_cast<size_t>(C) * OC, ++seed);
      auto db0 = test::randn(OC, ++seed);
      Guarded dinp(dinp0), dw(dw0), db(db0);
      matmul_backward(dinp.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(), inp.data(),
                      w.data(), N, C, OC, ctx);
      std::vector<double> rdinp = test::to_double(dinp0), rdw = test::to_double(dw0),
                          rdb = test::to_double(db0);
      for (int n = 0; n < N; ++n)
        for (int o = 0; o < OC; ++o) {
          const double g = dout[static_cast<size_t>(n) * OC + o];
          if (with_bias) rdb[o] += g;
          for (int c = 0; c < C; ++c) {
            rdinp[static_cast<size_t>(n) * C + c] += g * w[static_cast<size_t>(c) * OC + o];
            rdw[static_cast<size_t>(c) * OC + o] += g * inp[static_cast<size_t>(n) * C + c];
          }
        }
      const std::string what =
          " N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC);
      EXPECT_TRUE(all_close(dinp.values(), rdinp, lc.tol, "dinp" + what));
      EXPECT_TRUE(all_close(dw.values(), rdw, lc.tol, "dweight" + what));
      EXPECT_TRUE(all_close(db.values(), rdb, lc.tol, "dbias" + what));  // unchanged when dbias is null
      EXPECT_TRUE(dinp.guards_intact() && dw.guards_intact() && db.guards_intact()) << what;
    }
  }
}

TEST(Matmul, BiasGradientIsThreadCountIndependent) {
  Context ctx;
  const int N = 97, C = 16, OC = 200;
  auto inp = test::randn(static_cast<size_t>(N) * C, 1), w = test::randn(static_cast<size_t>(C) * OC, 2);
  auto dout = test::randn(static_cast<size_t>(N) * OC, 3);
  std::vector<float> results[2];
  for (int threads : {1, 2}) {
    test::ScopedThreads scope(threads);
    std::vector<float> dinp(static_cast<size_t>(N) * C), dw(static_cast<size_t>(C) * OC), db(OC, 0.0f);
    matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC, ctx);
    results[threads - 1] = db;
  }
  EXPECT_TRUE(test::bit_identical(results[0], results[1], "dbias with 1 and 2 threads"));
}

}  // namespace
}  // namespace mptrain::cpu
