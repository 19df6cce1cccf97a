// `mptrain bench --device cuda` (train/cuda_bench.h): GPT-2 training steps on GPU 0 through
// cuda::Gpt2Device, timed with the stream synchronised before and after each step (so a step's
// time is its whole device time plus its host syncs), on random tokens as the CPU bench uses.
//
// --ladder: issue 8's speed-up ladder in this one process, one row per optimisation, each row
// its own Gpt2Device (the previous one freed first) on the same preset, batch and sequence:
//   fp32 (naive attention, unfused kernels, unpadded vocabulary 50257, no graphs) → tf32 →
//   bf16 → + fused kernels → + flash attention → + padded vocabulary (50304) → + CUDA graphs.
// Without --ladder: one row, --precision with the default options (flash where it applies,
// fused, padded vocabulary). Then, unless --no-peer, the PyTorch peer
// (bench/pytorch_gpt2_cuda.py: bf16 autocast + torch.compile + flash SDPA, same model, batch
// and sequence) as a child process, and our best row against it and against llm.c's published
// figure (a number from its README, not a run).
//
// MFU is measured against the GPU's bf16 dense tensor-core peak for every row (fp32 rows too,
// so rows compare): 989 TFLOP/s, the H100 SXM data-sheet number, unless --peak-tflops is given.
// Every row counts the same useful FLOPs (the unpadded vocabulary's), so padding shows as time.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/gpt2_device.h"
#include "backend/device.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/rng.h"
#include "model/gpt2.h"
#include "precision/precision.h"
#include "train/child_result.h"
#include "train/cuda_bench.h"

namespace mptrain {

namespace {

// llm.c's published GPT-2 (124M) run (README, "reproducing GPT-2 124M"): 8×H100 SXM, 524,288
// tokens per step in ~139 ms, i.e. ~470K tokens/s per GPU. A published number, not run here.
constexpr double kLlmcTokensPerGpu = 470e3;
constexpr double kLlmcStepMs = 139.0;

// One row of the table: what it runs, and what it measured (or why it has no result).
struct Row {
  std::string name;  // what the row adds to the one before it
  Precision precision = Precision::Fp32;
  cuda::Gpt2DeviceOptions options;
  bool padded_vocab = true;
  BenchResult result;  // peak_rss_mb holds the GPU's memory in use (cudaMemGetInfo) after the steps
  std::string applied;  // the options as the device applied them (attention may fall back)
  std::string error;
};

cuda::Gpt2DeviceOptions options_of(cuda::Gpt2Attention attention, bool fused, bool graphs) {
  cuda::Gpt2DeviceOptions o;
  o.attention = attention;
  o.fused = fused;
  o.graphs = graphs;
  return o;
}

Row make_row(std::string name, Precision p, const cuda::Gpt2DeviceOptions& options, bool padded_vocab) {
  Row r;
  r.name = std::move(name);
  r.precision = p;
  r.options = options;
  r.padded_vocab = padded_vocab;
  return r;
}

std::vector<Row> ladder_rows() {
  using cuda::Gpt2Attention;
  const cuda::Gpt2DeviceOptions plain = options_of(Gpt2Attention::Naive, false, false);
  const cuda::Gpt2DeviceOptions fused = options_of(Gpt2Attention::Naive, true, false);
  const cuda::Gpt2DeviceOptions flash = options_of(Gpt2Attention::Flash, true, false);
  const cuda::Gpt2DeviceOptions graphs = options_of(Gpt2Attention::Flash, true, true);
  return {make_row("fp32", Precision::Fp32, plain, false),
          make_row("tf32", Precision::Tf32, plain, false),
          make_row("bf16", Precision::Bf16, plain, false),
          make_row("+ fused kernels", Precision::Bf16, fused, false),
          make_row("+ flash attention", Precision::Bf16, flash, false),
          make_row("+ padded vocabulary", Precision::Bf16, flash, true),
          make_row("+ CUDA graphs", Precision::Bf16, graphs, true)};
}

std::string describe(const cuda::Gpt2Device& model) {
  const cuda::Gpt2DeviceOptions& o = model.options();
  return std::string(precision_name(model.precision())) + ", " + cuda::attention_name(o.attention) + " attention, " +
         (o.fused ? "fused" : "unfused") + ", Vp " + std::to_string(model.config().padded_vocab_size) +
         (o.graphs ? ", graphs" : "");
}

Gpt2Config row_config(const BenchOptions& o, bool padded) {
  Gpt2Config c = gpt2_preset(o.preset, o.vocab_multiple);
  if (!padded) c.padded_vocab_size = c.vocab_size;
  return c;
}

// Initial parameters per vocabulary padding (wte has Vp rows), made once each.
const std::vector<float>& initial_params(const Gpt2Config& config, std::map<int, std::vector<float>>& cache) {
  std::vector<float>& init = cache[config.padded_vocab_size];
  if (init.empty()) {
    const ParamTable table = gpt2_param_table(config);
    init.resize(table.total());
    init_params(table, init.data(), 1337, config.init_std, config.init_std / std::sqrt(2.0f * config.n_layer));
  }
  return init;
}

void time_row(const BenchOptions& o, Row& row, const std::vector<float>& init, double flops, double peak,
              cuda::Context& ctx) {
  const Gpt2Config config = row_config(o, row.padded_vocab);
  cuda::Gpt2Device model(config, row.precision, o.batch, o.seq, ctx, row.options);
  row.applied = describe(model);
  model.upload_params(init.data());
  const size_t n = static_cast<size_t>(o.batch) * o.seq;
  std::vector<int> tokens(n), targets(n);
  uint64_t draw = 0;
  const AdamWHyper hyper{};
  // With graphs the first call of a shape runs eagerly and the second captures: at least two
  // untimed steps, so that the timed ones replay.
  const int warmup = row.options.graphs ? std::max(o.warmup, 2) : o.warmup;
  std::vector<double> times;
  BenchResult& r = row.result;
  for (int s = 0; s < warmup + o.steps; ++s) {
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
      std::printf("  step %d%s: %.2f ms (loss %.4f)%s\n", s + 1, s < warmup ? " (warmup)" : "", ms, loss,
                  applied ? "" : " (skipped: inf/NaN gradient)");
    if (s >= warmup) times.push_back(ms);
    r.last_loss = loss;
  }
  r.ms_per_step = median(times);
  r.tokens_per_s = static_cast<double>(n) / (r.ms_per_step / 1e3);
  r.tflops = flops / (r.ms_per_step / 1e3) / 1e12;
  r.peak_rss_mb = cuda::device_memory_in_use_mb();
  r.model_mb = static_cast<double>(model.device_bytes()) / (1024.0 * 1024.0);
  r.skipped_steps = model.loss_scaler() ? model.loss_scaler()->skipped_steps() : 0;
  std::printf("mptrain cuda %s (%s): %.2f ms/step | %.0f tok/s | %.2f TFLOP/s | MFU %.1f%% | GPU memory in use %.0f "
              "MB, model %.0f MB (median of %d)%s\n",
              row.name.c_str(), row.applied.c_str(), r.ms_per_step, r.tokens_per_s, r.tflops, 100.0 * r.tflops / peak,
              r.peak_rss_mb, r.model_mb, o.steps,
              row.options.graphs ? (" | " + std::to_string(model.captured_graphs()) + " graph(s) captured").c_str()
                                 : "");
  if (r.skipped_steps > 0)
    std::printf("fp16: %lld of %d steps skipped by the loss scaler (final scale %g)\n", (long long)r.skipped_steps,
                warmup + o.steps, model.loss_scaler()->scale());
  if (o.result_line)
    std::printf("RESULT device=cuda row=\"%s\" precision=%s options=\"%s\" ms_per_step=%.3f tokens_per_s=%.1f "
                "tflops=%.5f gpu_mem_mb=%.1f model_mb=%.1f loss=%.6f skipped=%lld\n",
                row.name.c_str(), precision_name(row.precision), row.applied.c_str(), r.ms_per_step, r.tokens_per_s,
                r.tflops, r.peak_rss_mb, r.model_mb, r.last_loss, (long long)r.skipped_steps);
  std::fflush(stdout);
}

void print_table(const std::vector<Row>& rows, double flops, double peak, const BenchOptions& o) {
  std::printf("\n| row | runs | ms/step | tokens/s | TFLOP/s | MFU | GPU memory in use (MB) | model (MB) | "
              "speed-up vs previous row |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  double previous_ms = 0.0;
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      std::printf("| %s | failed: %s | | | | | | | |\n", r.name.c_str(), r.error.c_str());
      previous_ms = 0.0;
      continue;
    }
    const BenchResult& b = r.result;
    char speedup[32] = "-";
    if (previous_ms > 0) std::snprintf(speedup, sizeof(speedup), "%.2fx", previous_ms / b.ms_per_step);
    std::printf("| %s | %s | %.2f | %s | %.2f | %.1f%% | %.0f | %.0f | %s |\n", r.name.c_str(), r.applied.c_str(),
                b.ms_per_step, format_si(b.tokens_per_s).c_str(), b.tflops, 100.0 * b.tflops / peak, b.peak_rss_mb,
                b.model_mb, speedup);
    previous_ms = b.ms_per_step;
  }
  std::printf("\nTFLOP/s = %.4g useful model FLOPs per step (6N + 6LCT per token, N with the unpadded vocabulary) / "
              "step time; MFU against %.1f TFLOP/s (%s) for every row. GPU memory in use = cudaMemGetInfo's total - "
              "free after the steps (the whole GPU); model = this model's device buffers (fp32 params, grads, "
              "optimizer state, 16-bit copies, activations).\n",
              flops, peak, o.peak_tflops > 0 ? "--peak-tflops" : "H100 SXM bf16 dense data-sheet peak");
}

const Row* best_row(const std::vector<Row>& rows) {
  const Row* best = nullptr;
  for (const Row& r : rows)
    if (r.error.empty() && (!best || r.result.ms_per_step < best->result.ms_per_step)) best = &r;
  return best;
}

// The PyTorch peer on the same model, batch and sequence, in its best recipe (bf16 autocast,
// torch.compile, flash SDPA, the padded vocabulary); returns its median ms/step (0: no result).
double run_torch_peer(const BenchOptions& o, int padded_vocab) {
  const std::string script =
      o.peer_script.empty() ? default_peer_script("pytorch_gpt2_cuda.py") : o.peer_script;
  if (script.empty()) {
    std::printf("peer: bench/pytorch_gpt2_cuda.py not found; skipping the PyTorch comparison\n");
    return 0.0;
  }
  const std::string cmd = o.python + " " + script + " --preset " + o.preset + " --batch " + std::to_string(o.batch) +
                          " --seq " + std::to_string(o.seq) + " --steps " + std::to_string(o.steps) + " --warmup " +
                          std::to_string(o.warmup) + " --precision bf16 --attn flash --compile --vocab " +
                          std::to_string(padded_vocab) + " 2>&1";
  std::printf("\npeer: %s\n", cmd.c_str());
  const ChildResult c = run_child(cmd, [&](const char* line) {
    if (!o.quiet) std::printf("  [torch] %s", line);
  });
  const double ms = c.field("ms_per_step");
  if (!c.ok() || ms <= 0.0) {
    std::printf("peer: PyTorch run failed (exit status %d: %s); no ratio\n", c.exit_status, c.last_line.c_str());
    return 0.0;
  }
  return ms;
}

void compare_with_peers(const BenchOptions& o, const std::vector<Row>& rows, double peer_ms) {
  const Row* best = best_row(rows);
  if (!best) return;
  const double tokens = static_cast<double>(o.batch) * o.seq;
  std::printf("\nbest row: %s (%s), %.2f ms/step, %.0f tok/s\n", best->name.c_str(), best->applied.c_str(),
              best->result.ms_per_step, best->result.tokens_per_s);
  if (peer_ms > 0)
    std::printf("PyTorch (bf16 autocast + torch.compile + flash SDPA, same model, batch %d x %d): %.2f ms/step, %.0f "
                "tok/s; mptrain best row / PyTorch: %.2fx the speed\n",
                o.batch, o.seq, peer_ms, tokens / (peer_ms / 1e3), peer_ms / best->result.ms_per_step);
  std::printf("llm.c, PUBLISHED figure (its README; not run here): GPT-2 124M on 8xH100 SXM, ~%.0fK tok/s per GPU "
              "(%.0f ms per 524,288-token step, 64 x 1024 tokens per GPU); mptrain best row on this GPU: %.0fK tok/s "
              "= %.2fx of that per-GPU figure (batch %d x %d, one GPU, no all-reduce)\n",
              kLlmcTokensPerGpu / 1e3, kLlmcStepMs, best->result.tokens_per_s / 1e3,
              best->result.tokens_per_s / kLlmcTokensPerGpu, o.batch, o.seq);
}

}  // namespace

BenchResult run_cuda_bench(const BenchOptions& o) {
  MPT_CHECK(o.model == "gpt2", "[bench] --device cuda times GPT-2 only (--model " + o.model + " has no GPU path yet)");
  MPT_CHECK(o.optimizer == "adamw", "[bench] --device cuda runs AdamW only (--optimizer " + o.optimizer +
                                        " has no GPU path yet)");
  MPT_CHECK(o.steps > 0 && o.warmup >= 0, "--steps must be positive and --warmup >= 0");
  if (cuda_device_count() == 0)
    throw Error("[bench] --device cuda: no CUDA GPU on this machine (cudaGetDeviceCount reports none)");
  const Gpt2Config padded = row_config(o, true), unpadded = row_config(o, false);
  MPT_CHECK(o.seq <= padded.block_size, "--seq " + std::to_string(o.seq) + " is longer than the model's context of " +
                                            std::to_string(padded.block_size));
  std::vector<Row> rows;
  if (o.ladder)
    rows = ladder_rows();
  else
    rows.push_back(make_row(precision_name(parse_precision(o.precision)), parse_precision(o.precision), {}, true));

  cuda::Context ctx(0);
  const double flops = gpt2_flops_per_token(unpadded, o.seq) * o.batch * o.seq;
  const double peak = o.peak_tflops > 0 ? o.peak_tflops : kH100SxmBf16DenseTflops;
  if (!o.quiet) {
    std::printf("bench: %s (%zu params with V %d) on %s, batch %d x %d, AdamW, %d warmup + %d timed steps (median), "
                "stream synchronised around each step\n",
                o.preset.c_str(), gpt2_param_table(unpadded).total(), unpadded.vocab_size, ctx.info().name.c_str(),
                o.batch, o.seq, o.warmup, o.steps);
    std::printf("MFU against %.1f TFLOP/s (%s)\n", peak,
                o.peak_tflops > 0 ? "--peak-tflops" : "H100 SXM bf16 dense data-sheet peak");
  }
  std::map<int, std::vector<float>> inits;
  for (Row& row : rows) {
    if (o.ladder && !o.quiet) std::printf("ladder: %s ...\n", row.name.c_str());
    try {  // one model at a time: its device memory is freed before the next row
      time_row(o, row, initial_params(row_config(o, row.padded_vocab), inits), flops, peak, ctx);
    } catch (const std::exception& e) {
      if (!o.ladder) throw;
      row.error = e.what();
      std::printf("ladder: %s failed: %s\n", row.name.c_str(), e.what());
    }
  }
  if (o.ladder) print_table(rows, flops, peak, o);
  const double peer_ms = o.peer ? run_torch_peer(o, padded.padded_vocab_size) : 0.0;
  compare_with_peers(o, rows, peer_ms);
  std::fflush(stdout);
  BenchResult first = rows.front().result;
  first.peer_ms_per_step = peer_ms;
  return first;
}

}  // namespace mptrain
