// The optimizer half of a CPU training step on a GPT-2 124M-sized flat buffer: global gradient
// norm, clipping and the AdamW update (the work train/step.cpp does after the backward). These
// are memory-bound passes; the counters report the bytes each one touches per second, to compare
// with the machine's bandwidth. Google Benchmark; run:
//   build/bench_optim --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "backend/ops/convert.h"
#include "backend/ops/optimizer.h"
#include "core/rng.h"
#include "optim/adamw.h"
#include "optim/grad_norm.h"

namespace {

using namespace mptrain;

constexpr size_t kGpt2Params = 124475904;  // gpt2 (124M) with the vocabulary padded to 50304

std::vector<float> gradients(size_t n) {
  std::vector<float> g(n);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) g[i] = 1e-3f * normal01(3, 0, i);
  return g;
}

// Bytes moved per iteration, reported as a rate over the measured time.
void bytes_per_second(benchmark::State& state, double bytes) {
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_GlobalNorm(benchmark::State& state) {
  const std::vector<float> g = gradients(kGpt2Params);
  for (auto _ : state) benchmark::DoNotOptimize(cpu::sum_of_squares(g.data(), g.size()));
  bytes_per_second(state, 4.0 * kGpt2Params);
}

void BM_ClipGradNorm(benchmark::State& state) {
  std::vector<float> g = gradients(kGpt2Params);
  // A norm far above max_norm, so every call rescales (and the values stay finite: 0.999ⁿ).
  for (auto _ : state) cpu::scale(g.data(), g.size(), clip_coefficient(1.001, 1.0f));
  bytes_per_second(state, 8.0 * kGpt2Params);
}

// GPT-2 124M's optimizer buffers and AdamW's update over them (lr 6e-4, betas 0.9/0.95, wd 0.1),
// with its own step count.
struct AdamWBuffers {
  std::vector<float> g = gradients(kGpt2Params), p = std::vector<float>(kGpt2Params, 0.02f),
                     m = std::vector<float>(kGpt2Params, 0.0f), v = std::vector<float>(kGpt2Params, 0.0f);
  std::vector<std::uint16_t> copy = std::vector<std::uint16_t>(kGpt2Params);  // a bf16 weight copy
  int64_t t = 0;
  void update(float grad_scale = 1.0f, const cpu::OperandCopyOut& out = {}) {
    cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), p.size(), 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, ++t,
                      grad_scale, nullptr, out);
  }
};

void BM_AdamW(benchmark::State& state) {
  AdamWBuffers b;
  for (auto _ : state) {
    b.update();
    benchmark::DoNotOptimize(b.p.data());
  }
  bytes_per_second(state, 28.0 * kGpt2Params);  // g, p, m, v read; p, m, v written
}

// The update with clipping's factor applied as it reads each gradient (what train/step.cpp does):
// compare with BM_ClipGradNorm + BM_AdamW, the two passes it replaces.
void BM_AdamWWithClipFactor(benchmark::State& state) {
  AdamWBuffers b;
  for (auto _ : state) {
    b.update(0.5f);
    benchmark::DoNotOptimize(b.p.data());
  }
  bytes_per_second(state, 28.0 * kGpt2Params);
}

// The update and the bf16 weight copy the next forward reads (model/weight_copies.h): as two passes
// (the update, then the copy re-reading every fp32 weight) and fused (each block copied while it is
// in cache, AdamWArgs::copy), what train/step.cpp does on the CPU.
void BM_AdamWThenBf16Copy(benchmark::State& state) {
  AdamWBuffers b;
  for (auto _ : state) {
    b.update();
    cpu::convert(b.copy.data(), StorageType::BF16, b.p.data(), StorageType::F32, b.p.size());
    benchmark::DoNotOptimize(b.copy.data());
  }
  bytes_per_second(state, 30.0 * kGpt2Params);  // the update's 28, and the copy's 2 written
}

void BM_AdamWFusedBf16Copy(benchmark::State& state) {
  AdamWBuffers b;
  for (auto _ : state) {
    b.update(1.0f, {b.copy.data(), StorageType::BF16, ComputeType::BF16});
    benchmark::DoNotOptimize(b.copy.data());
  }
  bytes_per_second(state, 30.0 * kGpt2Params);
}

BENCHMARK(BM_GlobalNorm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ClipGradNorm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AdamW)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AdamWWithClipFactor)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AdamWThenBf16Copy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AdamWFusedBf16Copy)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
