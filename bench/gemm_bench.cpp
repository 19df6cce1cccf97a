// GEMM throughput of the CPU backend, fp32 vs bf16 operands (fp32 accumulation), on every
// GEMM of a GPT-2 124M training step at B·T = 1024 tokens, in the orientation the step runs it:
// the forward X·W, the input gradient dY·W^T (W read transposed) and the weight gradient X^T·dY
// (X read transposed). Warm operands, one shape at a time: the ceiling the step's GEMMs can
// reach on the machine (issue 23). Google Benchmark; run:
//   build/bench_gemm --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <utility>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/ops/gemm.h"
#include "core/dtype.h"
#include "core/rng.h"

namespace {

using namespace mptrain;

// Which operand the step reads transposed: neither (the forward X·W), B (the input gradient
// dY·W^T) or A (the weight gradient X^T·dY).
enum Orientation { kPlain = 0, kBTransposed = 1, kATransposed = 2 };

template <StorageType T>
void BM_Gemm(benchmark::State& state) {
  const int M = static_cast<int>(state.range(0)), N = static_cast<int>(state.range(1)),
            K = static_cast<int>(state.range(2));
  const auto orientation = static_cast<Orientation>(state.range(3));
  // A is [M, K] row-major, or stored [K, M] and read transposed; B is [K, N], or stored [N, K].
  const cpu::GemmLayout la =
      orientation == kATransposed ? cpu::GemmLayout{0, 0, 1, M} : cpu::GemmLayout{0, 0, K, 1};
  const cpu::GemmLayout lb =
      orientation == kBTransposed ? cpu::GemmLayout{0, 0, 1, K} : cpu::GemmLayout{0, 0, N, 1};
  cpu::Context ctx;
  const size_t bytes = storage_bytes(T);
  std::vector<char> a(static_cast<size_t>(M) * K * bytes), b(static_cast<size_t>(K) * N * bytes);
  for (size_t i = 0; i < a.size() / bytes; ++i) {
    const float v = normal01(1, 0, i);
    if (T == StorageType::F32)
      reinterpret_cast<float*>(a.data())[i] = v;
    else
      reinterpret_cast<Bf16*>(a.data())[i] = f32_to_bf16(v);
  }
  for (size_t i = 0; i < b.size() / bytes; ++i) {
    const float v = normal01(2, 0, i);
    if (T == StorageType::F32)
      reinterpret_cast<float*>(b.data())[i] = v;
    else
      reinterpret_cast<Bf16*>(b.data())[i] = f32_to_bf16(v);
  }
  std::vector<float> c(static_cast<size_t>(M) * N);
  for (auto _ : state) {
    cpu::gemm_batched_typed(c.data(), StorageType::F32, cpu::GemmLayout{0, 0, N, 1}, a.data(), T, la,
                            b.data(), T, lb, 1, 1, M, N, K, false, ctx);
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
BENCHMARK(BM_Gemm<StorageType::BF16>) GPT2_SHAPES;

}  // namespace

BENCHMARK_MAIN();
