// Our AMX kernel (backend/cpu/amx_gemm.h): on a CPU with the tiles, every product class against a
// float64 reference — edges of 16 and 32, both transposes, accumulation, bf16 output, batches of
// the attention's kind and a layer's — with the same bits on 1 and 2 threads; everywhere, the
// products it leaves to oneDNN (and, without tiles, all of them), and the default path: with
// MPTRAIN_AMX unset gemm_batched_typed is oneDNN's bit for bit. Training with MPTRAIN_AMX=1 runs
// (on the tiles where they exist, else with the one refusal line) and tracks the default run.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/amx_gemm.h"
#include "backend/cpu/context.h"
#include "backend/ops/gemm.h"
#include "op_test_util.h"
#include "common/test_util.h"
#include "core/dtype.h"
#include "core/rng.h"

namespace mptrain {
namespace {

using cpu::GemmLayout;

std::vector<std::uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::vector<std::uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = f32_to_bf16(normal01(seed, 0, i)).bits;
  return v;
}
double value(std::uint16_t b) { return bf16_to_f32(Bf16{b}); }

// One product class: sizes, whether A and B are read transposed, accumulation, C's dtype, a batch.
struct Shape {
  int M, N, K;
  bool a_t, b_t, accumulate, c_bf16;
  int nb0 = 1, nb1 = 1;
};

// Runs the shape on the AMX kernel and returns the relative error against float64, or -1 when the
// kernel did not take it.
double amx_error(const Shape& s, std::vector<float>* out = nullptr) {
  const int batches = s.nb0 * s.nb1;
  const std::int64_t MK = static_cast<std::int64_t>(s.M) * s.K, KN = static_cast<std::int64_t>(s.K) * s.N,
                     MN = static_cast<std::int64_t>(s.M) * s.N;
  const std::vector<std::uint16_t> a = random_bf16(MK * batches, 1), b = random_bf16(KN * batches, 2);
  const GemmLayout la = s.a_t ? GemmLayout{MK * s.nb1, MK, 1, s.M} : GemmLayout{MK * s.nb1, MK, s.K, 1};
  const GemmLayout lb = s.b_t ? GemmLayout{KN * s.nb1, KN, 1, s.K} : GemmLayout{KN * s.nb1, KN, s.N, 1};
  const GemmLayout lc{MN * s.nb1, MN, s.N, 1};
  std::vector<float> c(MN * batches);
  for (size_t i = 0; i < c.size(); ++i) c[i] = s.accumulate ? normal01(3, 0, i) : 99.0f;
  const std::vector<float> c0 = c;
  std::vector<std::uint16_t> cb(MN * batches, 0);
  cpu::AmxBuffers buffers;
  const bool taken = cpu::amx_gemm(s.c_bf16 ? static_cast<void*>(cb.data()) : c.data(),
                                   s.c_bf16 ? StorageType::BF16 : StorageType::F32, lc, a.data(), StorageType::BF16,
                                   la, b.data(), StorageType::BF16, lb, s.nb0, s.nb1, s.M, s.N, s.K, s.accumulate,
                                   buffers);
  if (!taken) return -1.0;
  double num = 0.0, den = 0.0;
  for (int i = 0; i < s.nb0; ++i)
    for (int j = 0; j < s.nb1; ++j)
      for (int m = 0; m < s.M; ++m)
        for (int n = 0; n < s.N; ++n) {
          const std::int64_t at_c = i * lc.batch0 + j * lc.batch1 + m * lc.row + n;
          double ref = s.accumulate ? c0[at_c] : 0.0;
          for (int k = 0; k < s.K; ++k)
            ref += value(a[i * la.batch0 + j * la.batch1 + m * la.row + k * la.col]) *
                   value(b[i * lb.batch0 + j * lb.batch1 + k * lb.row + n * lb.col]);
          const double got = s.c_bf16 ? value(cb[at_c]) : c[at_c];
          num += (got - ref) * (got - ref);
          den += ref * ref;
        }
  if (out) *out = s.c_bf16 ? std::vector<float>(cb.begin(), cb.end()) : c;
  return std::sqrt(num / den);
}

std::string name(const Shape& s) {
  return std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K) + (s.a_t ? " A^T" : "") +
         (s.b_t ? " B^T" : "") + (s.accumulate ? " +=" : "") + (s.c_bf16 ? " C bf16" : "") + " batch " +
         std::to_string(s.nb0) + "x" + std::to_string(s.nb1);
}

TEST(AmxGemm, EveryProductClassMatchesTheFloat64Reference) {
  if (!cpu::amx_available()) GTEST_SKIP() << "no AMX here: " << cpu::amx_refusal();
  std::vector<Shape> shapes;
  for (const auto& [M, N, K] : std::vector<std::array<int, 3>>{{16, 16, 32}, {32, 32, 64}, {7, 5, 32}, {33, 47, 96},
                                                                {100, 70, 64}, {64, 300, 128}})
    for (const bool a_t : {false, true})
      for (const bool b_t : {false, true})
        for (const bool acc : {false, true}) shapes.push_back({M, N, K, a_t, b_t, acc, false});
  shapes.push_back({65, 33, 64, false, false, false, true});  // bf16 C (P·V's), rounded once
  shapes.push_back({64, 64, 64, false, true, false, false, 2, 3});  // the attention's heads, one a thread
  shapes.push_back({256, 64, 256, true, false, true, false, 1, 2});  // dK = dS^T·Q, fewer than the threads
  for (const Shape& s : shapes) {
    const double err = amx_error(s);
    ASSERT_GE(err, 0.0) << name(s) << ": not taken";
    // fp32 sums of exact bf16 products in another order; a bf16 output adds its rounding.
    EXPECT_LT(err, s.c_bf16 ? 8e-3 : 1e-5) << name(s);
  }
}

TEST(AmxGemm, SameBitsOnOneAndTwoThreads) {
  if (!cpu::amx_available()) GTEST_SKIP() << "no AMX here: " << cpu::amx_refusal();
  for (const Shape& s : {Shape{100, 70, 64, false, true, true, false}, Shape{64, 64, 64, false, true, false, false, 2, 3}}) {
    std::vector<float> one, two;
    {
      test::ScopedThreads t(1);
      amx_error(s, &one);
    }
    {
      test::ScopedThreads t(2);
      amx_error(s, &two);
    }
    EXPECT_EQ(one, two) << name(s);
  }
}

// What the kernel leaves to oneDNN, on every CPU (and, without tiles, everything).
TEST(AmxGemm, LeavesToOneDnnWhatItDoesNotTake) {
  EXPECT_LT(amx_error({16, 16, 48, false, false, false, false}), 0.0) << "K not a multiple of 32";
  EXPECT_LT(amx_error({16, 16, 32, false, false, true, true}), 0.0) << "bf16 C with accumulation";
  float c = 0.0f;
  const std::uint16_t one = f32_to_bf16(1.0f).bits;
  cpu::AmxBuffers buffers;
  EXPECT_FALSE(cpu::amx_gemm(&c, StorageType::F32, {0, 0, 1, 1}, &one, StorageType::F16, {0, 0, 32, 1}, &one,
                             StorageType::F16, {0, 0, 1, 1}, 1, 1, 1, 1, 32, false, buffers))
      << "fp16 operands";
  if (!cpu::amx_available()) {
    EXPECT_LT(amx_error({16, 16, 32, false, false, false, false}), 0.0) << "no tiles here";
    EXPECT_FALSE(cpu::amx_enabled());
  }
}

// The default path (MPTRAIN_AMX unset in the tests' environment): oneDNN's bits.
TEST(AmxGemm, TheDefaultProductIsOneDnns) {
  ASSERT_EQ(std::getenv("MPTRAIN_AMX"), nullptr) << "the tests run with MPTRAIN_AMX unset";
  EXPECT_FALSE(cpu::amx_enabled());
  const int M = 64, N = 96, K = 128;
  const std::vector<std::uint16_t> a = random_bf16(static_cast<size_t>(M) * K, 5), b = random_bf16(static_cast<size_t>(K) * N, 6);
  std::vector<float> c1(static_cast<size_t>(M) * N), c2(c1.size());
  cpu::Context ctx;
  cpu::gemm_batched_typed(c1.data(), StorageType::F32, {0, 0, N, 1}, a.data(), StorageType::BF16, {0, 0, K, 1},
                          b.data(), StorageType::BF16, {0, 0, N, 1}, 1, 1, M, N, K, false, ctx);
  cpu::gemm_onednn(c2.data(), StorageType::F32, {0, 0, N, 1}, a.data(), StorageType::BF16, {0, 0, K, 1}, b.data(),
                   StorageType::BF16, {0, 0, N, 1}, 1, 1, M, N, K, false, ctx);
  EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)), 0);
}

// A bf16 training run with MPTRAIN_AMX=1: on the tiles where they exist (the losses track the
// default run's within bf16's rounding), else one line saying why and oneDNN's run.
TEST(AmxGemm, TrainingWithTheKernelTracksTheDefault) {
  const std::string args = "bench --preset d2 --batch 2 --seq 64 --steps 3 --warmup 0 --threads 2 --no-peer "
                           "--precision bf16 --progress lines";
  const auto plain = testing::run_mptrain(args);
  const auto amx = testing::run_command("MPTRAIN_AMX=1 " + testing::mptrain_binary() + " " + args);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(amx.exit_code, 0) << amx.output;
  const bool said = amx.output.find("amx: ") != std::string::npos;
  EXPECT_EQ(said, !cpu::amx_available()) << amx.output;
  const auto last_loss = [](const std::string& out) {
    const size_t at = out.rfind("(loss ");
    return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 6));
  };
  ASSERT_GT(last_loss(plain.output), 0.0) << plain.output;
  EXPECT_NEAR(last_loss(amx.output), last_loss(plain.output), 2e-2 * last_loss(plain.output)) << amx.output;
}

}  // namespace
}  // namespace mptrain
