// GEMM throughput of the CPU backend, fp32 vs bf16 operands (fp32 accumulation), on every
// GEMM of a GPT-2 124M training step at B·T = 1024 tokens, in the orientation the step runs it:
// the forward X·W, the input gradient dY·W^T (W read transposed) and the weight gradient X^T·dY
// (X read transposed), and the attention's batched products over (b, h) at T = 256, read out of
// qkv through strides. Warm operands, one shape at a time: the ceiling the step's GEMMs can reach
// on the machine (issue 23). bf16 runs on each path apart: oneDNN's, and the AMX tiles' where the
// CPU has them (backend/cpu/amx_gemm.h; its rows are absent elsewhere). Google Benchmark; for the
// paths alternated, repeated and summarised as medians:
//   build/bench_gemm --benchmark_counters_tabular=true --benchmark_repetitions=5 \
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <utility>
#include <vector>

#include "backend/cpu/amx_gemm.h"
#include "backend/cpu/context.h"
#include "backend/ops/gemm.h"
#include "core/dtype.h"
#include "core/rng.h"

namespace {

using namespace mptrain;

// Which operand the step reads transposed: neither (the forward X·W), B (the input gradient
// dY·W^T) or A (the weight gradient X^T·dY).
enum Orientation { kPlain = 0, kBTransposed = 1, kATransposed = 2 };

// Which kernel runs the product: oneDNN's, or our AMX tiles'.
enum class Path { OneDnn, Amx };

// One product on `path` (the AMX rows skip themselves where the CPU has no tiles).
// `buffers`: the AMX path's packing buffers, kept across the iterations as the backend's Context
// keeps them.
void run_product(Path path, void* c, cpu::GemmLayout lc, const void* a, StorageType t, cpu::GemmLayout la,
                 const void* b, cpu::GemmLayout lb, int nb0, int nb1, int M, int N, int K, cpu::Context& ctx,
                 cpu::AmxBuffers& buffers) {
  if (path == Path::Amx)
    cpu::amx_gemm(c, StorageType::F32, lc, a, t, la, b, t, lb, nb0, nb1, M, N, K, false, buffers);
  else
    cpu::gemm_onednn(c, StorageType::F32, lc, a, t, la, b, t, lb, nb0, nb1, M, N, K, false, ctx);
}

// n values of N(0, 1) in storage t.
std::vector<char> random_values(StorageType t, size_t n, uint64_t seed) {
  const size_t bytes = storage_bytes(t);
  std::vector<char> v(n * bytes);
  for (size_t i = 0; i < n; ++i) {
    const float x = normal01(seed, 0, i);
    if (t == StorageType::F32)
      reinterpret_cast<float*>(v.data())[i] = x;
    else
      reinterpret_cast<Bf16*>(v.data())[i] = f32_to_bf16(x);
  }
  return v;
}

template <StorageType T, Path P = Path::OneDnn>
void BM_Gemm(benchmark::State& state) {
  if (P == Path::Amx && !cpu::amx_available()) {
    state.SkipWithError(("no AMX here: " + cpu::amx_refusal()).c_str());
    return;
  }
  const int M = static_cast<int>(state.range(0)), N = static_cast<int>(state.range(1)),
            K = static_cast<int>(state.range(2));
  const auto orientation = static_cast<Orientation>(state.range(3));
  // A is [M, K] row-major, or stored [K, M] and read transposed; B is [K, N], or stored [N, K].
  const cpu::GemmLayout la =
      orientation == kATransposed ? cpu::GemmLayout{0, 0, 1, M} : cpu::GemmLayout{0, 0, K, 1};
  const cpu::GemmLayout lb =
      orientation == kBTransposed ? cpu::GemmLayout{0, 0, 1, K} : cpu::GemmLayout{0, 0, N, 1};
  cpu::Context ctx;
  const std::vector<char> a = random_values(T, static_cast<size_t>(M) * K, 1),
                          b = random_values(T, static_cast<size_t>(K) * N, 2);
  std::vector<float> c(static_cast<size_t>(M) * N);
  cpu::AmxBuffers buffers;
  for (auto _ : state) {
    run_product(P, c.data(), cpu::GemmLayout{0, 0, N, 1}, a.data(), T, la, b.data(), lb, 1, 1, M, N, K, ctx, buffers);
    benchmark::DoNotOptimize(c.data());
  }
  // GFLOP per iteration, reported as a rate over the measured time.
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * M * N * K * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// {M, N, K, orientation} of the step: per layer (×12) c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj
// in each orientation, and the tied LM head (×1; its weight wte is [V, C], read transposed in the
// forward, plain in the input gradient, and its gradient is dlogits^T·X).
void Gpt2StepShapes(benchmark::internal::Benchmark* b) {
  for (const auto& [in, out] : {std::pair{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}}) {
    b->Args({1024, out, in, kPlain});        // Y = X·W
    b->Args({1024, in, out, kBTransposed});  // dX = dY·W^T
    b->Args({in, out, 1024, kATransposed});  // dW = X^T·dY
  }
  b->Args({1024, 50304, 768, kBTransposed});  // logits = X·wte^T
  b->Args({1024, 768, 50304, kPlain});        // dX = dlogits·wte
  b->Args({50304, 768, 1024, kATransposed});  // dwte = dlogits^T·X
  b->ArgNames({"M", "N", "K", "orient"})->Unit(benchmark::kMillisecond)->UseRealTime();
}
#define GPT2_SHAPES ->Apply(Gpt2StepShapes)
BENCHMARK(BM_Gemm<StorageType::F32>) GPT2_SHAPES;
BENCHMARK(BM_Gemm<StorageType::BF16, Path::OneDnn>) GPT2_SHAPES;
BENCHMARK(BM_Gemm<StorageType::BF16, Path::Amx>) GPT2_SHAPES;

// The attention's products at GPT-2 124M's B = 4, T = 256, 12 heads of 64, batched over (b, h) and
// read out of qkv [B·T, 3C] through strides as cpu/attention.cpp reads them (whole T×T blocks: the
// causal code runs the same products on row blocks): S = Q·K^T (K read transposed), Y = P·V,
// dP = dY·V^T, dQ = dS·K, dK = dS^T·Q (dS read transposed).
enum AttnProduct { kScores = 0, kValues = 1, kScoresGrad = 2, kQueryGrad = 3, kKeyGrad = 4 };

template <Path P>
void BM_Attention(benchmark::State& state) {
  if (P == Path::Amx && !cpu::amx_available()) {
    state.SkipWithError(("no AMX here: " + cpu::amx_refusal()).c_str());
    return;
  }
  constexpr int B = 4, T = 256, NH = 12, HS = 64, C = NH * HS;
  const auto product = static_cast<AttnProduct>(state.range(0));
  const std::vector<char> qkv = random_values(StorageType::BF16, static_cast<size_t>(B) * T * 3 * C, 3),
                          tt = random_values(StorageType::BF16, static_cast<size_t>(B) * NH * T * T, 4),
                          bt = random_values(StorageType::BF16, static_cast<size_t>(B) * T * C, 5);
  std::vector<float> out(static_cast<size_t>(B) * NH * T * T);
  // Per (b, h): a head of qkv [T, HS] (rows 3C apart), a T×T matrix, a head of a [B·T, C] tensor.
  const cpu::GemmLayout head{static_cast<std::int64_t>(T) * 3 * C, HS, 3 * C, 1},
      square{static_cast<std::int64_t>(NH) * T * T, static_cast<std::int64_t>(T) * T, T, 1},
      rows{static_cast<std::int64_t>(T) * C, HS, C, 1};
  const auto t = [](cpu::GemmLayout l) { return cpu::GemmLayout{l.batch0, l.batch1, l.col, l.row}; };
  const auto tall = [&](cpu::GemmLayout l) {  // fp32 outputs: T×T or T×HS per (b, h), contiguous
    return l.row == T ? square : cpu::GemmLayout{static_cast<std::int64_t>(NH) * T * HS, static_cast<std::int64_t>(T) * HS, HS, 1};
  };
  int M = T, N = T, K = HS;
  cpu::GemmLayout la = head, lb = t(head), lc = square;
  const char *a = qkv.data(), *b = qkv.data() + C * sizeof(Bf16);
  if (product == kValues || product == kQueryGrad) {  // [T,T]·[T,HS]
    M = T, N = HS, K = T, la = square, lb = head, a = tt.data(), lc = tall(cpu::GemmLayout{0, 0, HS, 1});
  } else if (product == kScoresGrad) {  // dY·V^T: [T,HS]·[HS,T]
    la = rows, a = bt.data();
  } else if (product == kKeyGrad) {  // dS^T·Q: [T,T]^T·[T,HS]
    M = T, N = HS, K = T, la = t(square), lb = head, a = tt.data(), b = qkv.data(), lc = tall(cpu::GemmLayout{0, 0, HS, 1});
  }
  cpu::Context ctx;
  cpu::AmxBuffers buffers;
  for (auto _ : state) {
    run_product(P, out.data(), lc, a, StorageType::BF16, la, b, lb, B, NH, M, N, K, ctx, buffers);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * B * NH * M * N * K * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void AttentionShapes(benchmark::internal::Benchmark* b) {
  for (int p = kScores; p <= kKeyGrad; ++p) b->Args({p});
  b->ArgNames({"product"})->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_Attention<Path::OneDnn>)->Apply(AttentionShapes);
BENCHMARK(BM_Attention<Path::Amx>)->Apply(AttentionShapes);

}  // namespace

BENCHMARK_MAIN();
