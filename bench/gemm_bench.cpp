// GEMM throughput of the CPU backend, fp32 vs bf16 operands (fp32 accumulation), on the
// shapes of a GPT-2 124M layer at B·T = 1024 tokens. Google Benchmark; run:
//   build/bench_gemm --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <vector>

#include "backend/cpu/context.h"
#include "backend/ops/gemm.h"
#include "core/dtype.h"
#include "core/rng.h"

namespace {

using namespace mptrain;

template <StorageType T>
void BM_Gemm(benchmark::State& state) {
  const int M = static_cast<int>(state.range(0)), N = static_cast<int>(state.range(1)),
            K = static_cast<int>(state.range(2));
  cpu::Context ctx;
  const size_t bytes = storage_bytes(T);
  std::vector<char> a(static_cast<size_t>(M) * K * bytes), b(static_cast<size_t>(K) * N * bytes);
  for (size_t i = 0; i < a.size() / bytes; ++i) {
    const float v = normal01(1, 0, i);
    if (T == StorageType::F32) reinterpret_cast<float*>(a.data())[i] = v;
    else reinterpret_cast<Bf16*>(a.data())[i] = f32_to_bf16(v);
  }
  for (size_t i = 0; i < b.size() / bytes; ++i) {
    const float v = normal01(2, 0, i);
    if (T == StorageType::F32) reinterpret_cast<float*>(b.data())[i] = v;
    else reinterpret_cast<Bf16*>(b.data())[i] = f32_to_bf16(v);
  }
  std::vector<float> c(static_cast<size_t>(M) * N);
  for (auto _ : state) {
    cpu::gemm_batched_typed(c.data(), StorageType::F32, cpu::GemmLayout{0, 0, N, 1}, a.data(), T,
                            cpu::GemmLayout{0, 0, K, 1}, b.data(), T, cpu::GemmLayout{0, 0, N, 1}, 1, 1, M, N, K,
                            false, ctx);
    benchmark::DoNotOptimize(c.data());
  }
  // GFLOP per iteration, reported as a rate over the measured time.
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * M * N * K * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

#define GPT2_SHAPES ->Args({1024, 2304, 768})->Args({1024, 3072, 768})->Args({1024, 768, 3072})->Args({1024, 50304, 768})->Unit(benchmark::kMillisecond)->UseRealTime()
BENCHMARK(BM_Gemm<StorageType::F32>) GPT2_SHAPES;
BENCHMARK(BM_Gemm<StorageType::BF16>) GPT2_SHAPES;

}  // namespace

BENCHMARK_MAIN();
