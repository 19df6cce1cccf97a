// `mptrain bench --device cuda` (train/cuda_bench.h): GPT-2 training steps on GPU 0 through
// cuda::Gpt2Device, timed with the stream synchronised before and after each step (so a step's
// time is its whole device time plus its host syncs), on random tokens as the CPU bench uses.
// With --ladder, fp32, tf32 and bf16 run one after another in this process (one model at a
// time; the device memory of the previous one is freed first), printed as one table with each
// row's speed-up over the row before it.
//
// MFU is measured against the GPU's bf16 dense tensor-core peak for every row (fp32 rows too,
// so rows compare): 989 TFLOP/s, the H100 SXM data-sheet number, unless --peak-tflops is given.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/context.h"
#include "backend/cuda/gpt2_device.h"
#include "backend/device.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/rng.h"
#include "model/gpt2.h"
#include "precision/precision.h"
#include "train/cuda_bench.h"

namespace mptrain {

namespace {

constexpr double kH100SxmBf16DenseTflops = 989.0;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t k = v.size();
  return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

double device_used_mb() {
  size_t free_b = 0, total_b = 0;
  MPT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<double>(total_b - free_b) / (1024.0 * 1024.0);
}

struct Rung {
  Precision precision;
  BenchResult result;  // peak_rss_mb holds the GPU's memory in use (cudaMemGetInfo) after the steps
  std::string error;
};

BenchResult time_one(const BenchOptions& o, const Gpt2Config& config, const std::vector<float>& init, Precision p,
                     double flops, double peak, cuda::Context& ctx) {
  cuda::Gpt2Device model(config, p, o.batch, o.seq, ctx);
  model.upload_params(init.data());
  const size_t n = static_cast<size_t>(o.batch) * o.seq;
  std::vector<int> tokens(n), targets(n);
  uint64_t draw = 0;
  const AdamWHyper hyper{};
  std::vector<double> times;
  BenchResult r;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    for (size_t i = 0; i < n; ++i) {  // the CPU bench's random batch
      tokens[i] = std::min(static_cast<int>(uniform01(42, 1, draw++) * config.vocab_size), config.vocab_size - 1);
      targets[i] = std::min(static_cast<int>(uniform01(42, 2, draw++) * config.vocab_size), config.vocab_size - 1);
    }
    ctx.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    const float loss = model.forward_backward(tokens.data(), targets.data(), o.batch, o.seq);
    const bool applied = model.step(1e-4f, hyper, 1.0f, s + 1);
    ctx.synchronize();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!o.quiet)
      std::printf("  step %d%s: %.2f ms (loss %.4f)%s\n", s + 1, s < o.warmup ? " (warmup)" : "", ms, loss,
                  applied ? "" : " (skipped: inf/NaN gradient)");
    if (s >= o.warmup) times.push_back(ms);
    r.last_loss = loss;
  }
  r.ms_per_step = median(times);
  r.tokens_per_s = static_cast<double>(n) / (r.ms_per_step / 1e3);
  r.tflops = flops / (r.ms_per_step / 1e3) / 1e12;
  r.peak_rss_mb = device_used_mb();
  r.model_mb = static_cast<double>(model.device_bytes()) / (1024.0 * 1024.0);
  r.skipped_steps = model.loss_scaler() ? model.loss_scaler()->skipped_steps() : 0;
  std::printf("mptrain cuda %s: %.2f ms/step | %.0f tok/s | %.2f TFLOP/s | MFU %.1f%% | GPU memory in use %.0f MB, "
              "model %.0f MB (median of %d)\n",
              precision_name(p), r.ms_per_step, r.tokens_per_s, r.tflops, 100.0 * r.tflops / peak, r.peak_rss_mb,
              r.model_mb, o.steps);
  if (r.skipped_steps > 0)
    std::printf("fp16: %lld of %d steps skipped by the loss scaler (final scale %g)\n", (long long)r.skipped_steps,
                o.warmup + o.steps, model.loss_scaler()->scale());
  if (o.result_line)
    std::printf("RESULT device=cuda precision=%s ms_per_step=%.3f tokens_per_s=%.1f tflops=%.5f gpu_mem_mb=%.1f "
                "model_mb=%.1f loss=%.6f skipped=%lld\n",
                precision_name(p), r.ms_per_step, r.tokens_per_s, r.tflops, r.peak_rss_mb, r.model_mb, r.last_loss,
                (long long)r.skipped_steps);
  std::fflush(stdout);
  return r;
}

}  // namespace

BenchResult run_cuda_bench(const BenchOptions& o) {
  MPT_CHECK(o.model == "gpt2", "[bench] --device cuda times GPT-2 only (--model " + o.model + " has no GPU path yet)");
  MPT_CHECK(o.optimizer == "adamw", "[bench] --device cuda runs AdamW only (--optimizer " + o.optimizer +
                                        " has no GPU path yet)");
  MPT_CHECK(o.steps > 0 && o.warmup >= 0, "--steps must be positive and --warmup >= 0");
  if (cuda_device_count() == 0)
    throw Error("[bench] --device cuda: no CUDA GPU on this machine (cudaGetDeviceCount reports none)");
  const Gpt2Config config = gpt2_preset(o.preset, o.vocab_multiple);
  MPT_CHECK(o.seq <= config.block_size, "--seq " + std::to_string(o.seq) + " is longer than the model's context of " +
                                            std::to_string(config.block_size));
  std::vector<Precision> precisions;
  if (o.ladder)
    precisions = {Precision::Fp32, Precision::Tf32, Precision::Bf16};
  else
    precisions = {parse_precision(o.precision)};

  cuda::Context ctx(0);
  const ParamTable table = gpt2_param_table(config);
  std::vector<float> init(table.total());
  init_params(table, init.data(), 1337, config.init_std, config.init_std / std::sqrt(2.0f * config.n_layer));
  const double tokens = static_cast<double>(o.batch) * o.seq;
  const double flops = gpt2_flops_per_token(config, o.seq) * tokens;
  const double peak = o.peak_tflops > 0 ? o.peak_tflops : kH100SxmBf16DenseTflops;
  if (!o.quiet) {
    std::printf("bench: %s (%zu params) on %s, batch %d x %d, AdamW, %d warmup + %d timed steps (median), "
                "stream synchronised around each step\n",
                o.preset.c_str(), table.total(), ctx.info().name.c_str(), o.batch, o.seq, o.warmup, o.steps);
    std::printf("MFU against %.1f TFLOP/s (%s)\n", peak,
                o.peak_tflops > 0 ? "--peak-tflops" : "H100 SXM bf16 dense data-sheet peak");
    if (o.peer) std::printf("peer: none on the GPU (bench/pytorch_gpt2.py runs on the CPU)\n");
  }
  std::vector<Rung> rungs;
  for (Precision p : precisions) {
    Rung rung{p, {}, {}};
    if (o.ladder && !o.quiet) std::printf("ladder: %s ...\n", precision_name(p));
    try {
      rung.result = time_one(o, config, init, p, flops, peak, ctx);
    } catch (const std::exception& e) {
      if (!o.ladder) throw;
      rung.error = e.what();
      std::printf("ladder: %s failed: %s\n", precision_name(p), e.what());
    }
    rungs.push_back(rung);
  }
  if (o.ladder) {
    std::printf("\n| precision | ms/step | tokens/s | TFLOP/s | MFU | GPU memory in use (MB) | model (MB) | "
                "speed-up vs previous row |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    double previous_ms = 0.0;
    for (const Rung& r : rungs) {
      if (!r.error.empty()) {
        std::printf("| %s | failed: %s | | | | | | |\n", precision_name(r.precision), r.error.c_str());
        previous_ms = 0.0;
        continue;
      }
      const BenchResult& b = r.result;
      char speedup[32] = "-";
      if (previous_ms > 0) std::snprintf(speedup, sizeof(speedup), "%.2fx", previous_ms / b.ms_per_step);
      std::printf("| %s | %.2f | %s | %.2f | %.1f%% | %.0f | %.0f | %s |\n", precision_name(r.precision),
                  b.ms_per_step, format_si(b.tokens_per_s).c_str(), b.tflops, 100.0 * b.tflops / peak,
                  b.peak_rss_mb, b.model_mb, speedup);
      previous_ms = b.ms_per_step;
    }
    std::printf("\nTFLOP/s = %.4g model FLOPs per step (6N + 6LCT per token) / step time; MFU against %.1f TFLOP/s "
                "(%s) for every row. GPU memory in use = cudaMemGetInfo's total - free after the steps (the whole "
                "GPU); model = this model's device buffers (fp32 params, grads, m, v, 16-bit copies, activations).\n",
                flops, peak, o.peak_tflops > 0 ? "--peak-tflops" : "H100 SXM bf16 dense data-sheet peak");
  }
  std::fflush(stdout);
  return rungs.front().result;
}

}  // namespace mptrain
