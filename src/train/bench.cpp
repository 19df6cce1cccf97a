// Training-step benchmark with an in-process-run PyTorch comparison.
#include "train/bench.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "backend/cpu/context.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/gpt2.h"
#include "optim/adamw.h"
#include "optim/make_optimizer.h"
#include "precision/loss_scaler.h"
#include "precision/precision.h"
#include "train/metrics.h"
#include "train/peak_flops.h"
#include "train/step.h"

namespace mptrain {

namespace fs = std::filesystem;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string default_peer_script() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (const fs::path& base : {exe.parent_path().parent_path(), fs::current_path()}) {
    const fs::path p = base / "bench" / "pytorch_gpt2.py";
    if (fs::exists(p)) return p.string();
  }
  return "";
}

// What the peer printed on its RESULT line.
struct PeerResult {
  double ms = 0.0;  // 0: the peer did not run or failed
  double peak_rss_mb = 0.0;
};

double result_field(const char* line, const char* key) {
  const std::string k = std::string(" ") + key + "=";
  const char* p = std::strstr(line, k.c_str());
  return p ? std::atof(p + k.size()) : 0.0;
}

// Runs the peer in `precision` (fp32, or bf16 = torch's CPU autocast) and returns its median
// ms/step and peak memory, parsed from its "RESULT ms_per_step=…" line.
PeerResult run_peer(const BenchOptions& o, int threads, int vocab, const std::string& precision, bool echo) {
  const std::string script = o.peer_script.empty() ? default_peer_script() : o.peer_script;
  if (script.empty() || !fs::exists(script)) {
    std::printf("peer: bench/pytorch_gpt2.py not found; skipping the PyTorch comparison\n");
    return {};
  }
  const std::string cmd = "ATEN_CPU_CAPABILITY=avx512 " + o.python + " " + script + " --preset " + o.preset +
                          " --batch " + std::to_string(o.batch) + " --seq " + std::to_string(o.seq) + " --steps " +
                          std::to_string(o.steps) + " --warmup " + std::to_string(o.warmup) + " --precision " +
                          precision + " --threads " + std::to_string(threads) + " --vocab " + std::to_string(vocab) +
                          " 2>&1";
  if (echo) std::printf("peer: %s\n", cmd.c_str());
  std::fflush(stdout);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  MPT_CHECK(pipe != nullptr, "cannot start the PyTorch peer");
  std::array<char, 4096> buf{};
  PeerResult r;
  while (std::fgets(buf.data(), buf.size(), pipe)) {
    if (echo) std::printf("  [torch] %s", buf.data());
    if (std::strncmp(buf.data(), "RESULT ", 7) == 0) {
      r.ms = result_field(buf.data(), "ms_per_step");
      r.peak_rss_mb = result_field(buf.data(), "peak_rss_mb");
    }
  }
  const int rc = ::pclose(pipe);
  if (rc != 0 || r.ms <= 0.0) {
    std::printf("peer: PyTorch %s run failed (exit status %d); no ratio\n", precision.c_str(), rc);
    return {};
  }
  return r;
}

// Times one precision in this process.
BenchResult bench_one(const BenchOptions& o) {
  const Precision precision = parse_precision(o.precision);
  const int threads = omp_get_max_threads();
  const Gpt2Config config = gpt2_preset(o.preset, o.vocab_multiple);
  MPT_CHECK(o.seq <= config.block_size, "--seq " + std::to_string(o.seq) + " is longer than the model's context of " +
                                            std::to_string(config.block_size));
  cpu::Context ctx;
  Gpt2 model(config, ctx, precision);
  model.init_weights(1337);
  model.plan(o.batch, o.seq);
  const size_t n = static_cast<size_t>(o.batch) * o.seq;
  const OptimizerKind kind = parse_optimizer_kind(o.optimizer);
  std::unique_ptr<Optimizer> optimizer =
      make_optimizer(kind, model.table(), AdamWHyper{}, SophiaHyper{}, static_cast<double>(n), 1337);
  // fp16 times the loss scaler's work too (unscale + inf check every step), as training does.
  std::unique_ptr<LossScaler> scaler;
  if (needs_loss_scaler(precision)) scaler = std::make_unique<LossScaler>();
  std::vector<int> inputs(n), targets(n);
  uint64_t draw = 0;
  auto next = [&](int* in, int* tg) {
    for (size_t i = 0; i < n; ++i) {
      in[i] = static_cast<int>(uniform01(42, 1, draw++) * config.vocab_size);
      tg[i] = static_cast<int>(uniform01(42, 2, draw++) * config.vocab_size);
    }
  };
  const double tokens = static_cast<double>(n);
  const double flops = gpt2_flops_per_token(config, o.seq) * tokens;
  const PeakFlops peak = cpu_peak_flops(threads, o.peak_tflops);
  if (!o.quiet) {
    std::printf("bench: %s (%zu params), batch %d x %d, %s, %s, %d threads, %d warmup + %d timed steps\n",
                o.preset.c_str(), model.num_params(), o.batch, o.seq, precision_name(precision), optimizer->name(),
                threads, o.warmup, o.steps);
    std::printf("MFU against a peak of %.3f TFLOP/s (fp32 FMA) = %s\n", peak.tflops, peak.formula.c_str());
  }
  Progress progress({.label = "bench",
                     .total = static_cast<double>(o.warmup + o.steps),
                     .mode = o.quiet ? ProgressMode::kNone : o.progress,
                     .out = stdout});
  std::vector<double> times;
  BenchResult r;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    const StepStats st = train_step(model, *optimizer, next, o.batch, o.seq, 1, 1e-4f, 1.0f, s + 1, inputs.data(),
                                    targets.data(), scaler.get());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    char line[200], status[160];
    std::snprintf(line, sizeof(line), "  step %d%s: %.1f ms (loss %.4f)%s%s", s + 1, s < o.warmup ? " (warmup)" : "",
                  ms, st.loss, st.curvature ? " + Hessian estimate" : "", st.skipped ? " (skipped: inf/NaN gradient)" : "");
    std::snprintf(status, sizeof(status), "step %d/%d | %.1f ms | %s tok/s | MFU %.2f%%", s + 1, o.warmup + o.steps,
                  ms, format_si(tokens / (ms / 1e3)).c_str(), mfu(flops / (ms / 1e3), peak) * 100.0);
    if (progress.mode() != ProgressMode::kNone) progress.print(line);
    progress.draw(s + 1, status);
    if (s >= o.warmup) times.push_back(ms);
    r.last_loss = st.loss;
  }
  r.ms_per_step = median(times);
  r.tokens_per_s = tokens / (r.ms_per_step / 1e3);
  r.tflops = flops / (r.ms_per_step / 1e3) / 1e12;
  r.peak_rss_mb = static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0);
  size_t model_bytes = 2 * model.num_params() * sizeof(float) + model.weight_copy_bytes() + model.activation_bytes();
  for (const auto& st : optimizer->state()) model_bytes += st.buffer.size() * sizeof(float);
  r.model_mb = static_cast<double>(model_bytes) / (1024.0 * 1024.0);
  r.skipped_steps = scaler ? scaler->skipped_steps() : 0;
  progress.finish();
  std::printf("mptrain %s: %.1f ms/step | %.0f tok/s | %.3f TFLOP/s | MFU %.2f%% | peak RSS %.0f MB, model %.0f MB "
              "(median of %d)\n",
              precision_name(precision), r.ms_per_step, r.tokens_per_s, r.tflops, mfu(r.tflops * 1e12, peak) * 100.0,
              r.peak_rss_mb, r.model_mb, o.steps);
  if (scaler && r.skipped_steps > 0)
    std::printf("fp16: %lld of %d steps skipped by the loss scaler (final scale %g)\n", (long long)r.skipped_steps,
                o.warmup + o.steps, scaler->scale());
  if (o.result_line)
    std::printf("RESULT precision=%s ms_per_step=%.3f tokens_per_s=%.1f tflops=%.5f peak_rss_mb=%.1f model_mb=%.1f "
                "loss=%.6f skipped=%lld\n",
                precision_name(precision), r.ms_per_step, r.tokens_per_s, r.tflops, r.peak_rss_mb, r.model_mb,
                r.last_loss, (long long)r.skipped_steps);
  const bool peer_precision = precision == Precision::Fp32 || precision == Precision::Bf16;
  if (!o.peer) {
  } else if (kind != OptimizerKind::AdamW) {
    std::printf("peer: skipped (bench/pytorch_gpt2.py runs AdamW; no like-for-like %s peer)\n", optimizer->name());
  } else if (!peer_precision) {
    std::printf("peer: skipped (torch %s has no CPU %s autocast; the peer runs fp32 or bf16)\n", "1.13",
                precision_name(precision));
  } else {
    const PeerResult peer = run_peer(o, threads, config.padded_vocab_size, precision_name(precision), !o.quiet);
    r.peer_ms_per_step = peer.ms;
    if (peer.ms > 0.0) {
      std::printf("pytorch %s: %.1f ms/step | %.0f tok/s | peak RSS %.0f MB\n", precision_name(precision), peer.ms,
                  tokens / (peer.ms / 1e3), peer.peak_rss_mb);
      std::printf("ratio: mptrain is %.2fx the speed of PyTorch (%s%s, same model, batch and optimizer)\n",
                  peer.ms / r.ms_per_step, precision_name(precision),
                  precision == Precision::Bf16 ? " autocast" : "");
    }
  }
  std::fflush(stdout);
  return r;
}

// Runs `mptrain bench --precision P --result-line` as a child and parses its RESULT line.
LadderRung run_rung(const BenchOptions& o, int threads, const std::string& precision) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  MPT_CHECK(!ec, "cannot find the mptrain executable (/proc/self/exe) to run the ladder's rungs");
  char peak[64] = "";
  if (o.peak_tflops > 0) std::snprintf(peak, sizeof(peak), " --peak-tflops %g", o.peak_tflops);
  const std::string cmd = self.string() + " bench --preset " + o.preset + " --vocab-multiple " +
                          std::to_string(o.vocab_multiple) + " --batch " + std::to_string(o.batch) + " --seq " +
                          std::to_string(o.seq) + " --steps " + std::to_string(o.steps) + " --warmup " +
                          std::to_string(o.warmup) + " --threads " + std::to_string(threads) + " --optimizer " +
                          o.optimizer + " --precision " + precision + peak +
                          " --no-peer --quiet --progress none --result-line 2>&1";
  LadderRung rung;
  rung.precision = precision;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  MPT_CHECK(pipe != nullptr, "cannot start the ladder's " + precision + " run");
  std::array<char, 4096> buf{};
  std::string last;
  bool got = false;
  while (std::fgets(buf.data(), buf.size(), pipe)) {
    const char* line = buf.data();
    if (std::strncmp(line, "RESULT ", 7) == 0) {
      rung.result.ms_per_step = result_field(line, "ms_per_step");
      rung.result.tokens_per_s = result_field(line, "tokens_per_s");
      rung.result.tflops = result_field(line, "tflops");
      rung.result.peak_rss_mb = result_field(line, "peak_rss_mb");
      rung.result.model_mb = result_field(line, "model_mb");
      rung.result.last_loss = static_cast<float>(result_field(line, "loss"));
      rung.result.skipped_steps = static_cast<int64_t>(result_field(line, "skipped"));
      got = rung.result.ms_per_step > 0.0;
    } else if (!o.quiet && std::strncmp(line, "mptrain ", 8) == 0) {
      std::printf("  %s", line);
    }
    last = line;
  }
  const int rc = ::pclose(pipe);
  if (rc != 0 || !got) {
    while (!last.empty() && (last.back() == '\n' || last.back() == '\r')) last.pop_back();
    rung.error = last.empty() ? "exit status " + std::to_string(rc) : last;
  }
  return rung;
}

}  // namespace

std::vector<LadderRung> run_ladder(const BenchOptions& o) {
  MPT_CHECK(o.steps > 0 && o.warmup >= 0, "--steps must be positive and --warmup >= 0");
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const int threads = omp_get_max_threads();
  const Gpt2Config config = gpt2_preset(o.preset, o.vocab_multiple);  // an unknown preset fails here, once
  MPT_CHECK(o.seq <= config.block_size, "--seq " + std::to_string(o.seq) + " is longer than the model's context of " +
                                            std::to_string(config.block_size));
  const OptimizerKind kind = parse_optimizer_kind(o.optimizer);
  const double tokens = static_cast<double>(o.batch) * o.seq;
  const double flops = gpt2_flops_per_token(config, o.seq) * tokens;
  const PeakFlops peak = cpu_peak_flops(threads, o.peak_tflops);
  const size_t n_params = gpt2_param_table(config).total();
  std::printf("precision ladder: %s, batch %d x %d, %s, %d threads, %d warmup + %d timed steps (median) per precision\n",
              o.preset.c_str(), o.batch, o.seq, o.optimizer.c_str(), threads, o.warmup, o.steps);
  std::fflush(stdout);

  std::vector<LadderRung> rungs;
  for (Precision p : {Precision::Fp32, Precision::Tf32, Precision::Bf16, Precision::Fp16}) {
    if (!o.quiet) std::printf("ladder: %s ...\n", precision_name(p));
    std::fflush(stdout);
    rungs.push_back(run_rung(o, threads, precision_name(p)));
    if (!rungs.back().error.empty()) std::printf("ladder: %s failed: %s\n", precision_name(p), rungs.back().error.c_str());
  }
  // The PyTorch peer in the precisions it has on the CPU: fp32 and bf16 autocast.
  PeerResult torch_fp32, torch_bf16;
  const bool peer = o.peer && kind == OptimizerKind::AdamW;
  if (o.peer && !peer) std::printf("peer: skipped (bench/pytorch_gpt2.py runs AdamW; no like-for-like %s peer)\n",
                                   o.optimizer.c_str());
  if (peer) {
    if (!o.quiet) std::printf("ladder: PyTorch fp32 and bf16 (autocast) ...\n");
    std::fflush(stdout);
    torch_fp32 = run_peer(o, threads, config.padded_vocab_size, "fp32", false);
    torch_bf16 = run_peer(o, threads, config.padded_vocab_size, "bf16", false);
  }

  const double fp32_ms = rungs[0].error.empty() ? rungs[0].result.ms_per_step : 0.0;
  std::printf("\n| precision | ms/step | tokens/s | TFLOP/s | MFU | peak RSS (MB) | model (MB) | speed-up vs fp32 | "
              "PyTorch ms/step | mptrain / PyTorch |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const LadderRung& r : rungs) {
    if (!r.error.empty()) {
      std::printf("| %s | failed: %s | | | | | | | | |\n", r.precision.c_str(), r.error.c_str());
      continue;
    }
    const BenchResult& b = r.result;
    const PeerResult* t = r.precision == "fp32" ? &torch_fp32 : r.precision == "bf16" ? &torch_bf16 : nullptr;
    char speedup[32] = "", tms[32] = "-", ratio[32] = "-";
    if (fp32_ms > 0) std::snprintf(speedup, sizeof(speedup), "%.2fx", fp32_ms / b.ms_per_step);
    if (t && t->ms > 0) {
      std::snprintf(tms, sizeof(tms), "%.1f", t->ms);
      std::snprintf(ratio, sizeof(ratio), "%.2fx", t->ms / b.ms_per_step);
    }
    std::printf("| %s%s | %.1f | %.0f | %.3f | %.1f%% | %.0f | %.0f | %s | %s | %s |\n", r.precision.c_str(),
                b.skipped_steps > 0 ? " (skipped steps!)" : "", b.ms_per_step, b.tokens_per_s, b.tflops,
                mfu(b.tflops * 1e12, peak) * 100.0, b.peak_rss_mb, b.model_mb, speedup, tms, ratio);
  }
  std::printf("\nTFLOP/s = %.4g model FLOPs per step (6N + 6LCT per token, %zu parameters) / step time; MFU against "
              "the fp32 FMA peak %.3f TFLOP/s = %s.\n",
              flops, n_params, peak.tflops, peak.formula.c_str());
  std::printf("peak RSS = the resident-set high-water mark (VmHWM) of each precision's own process: parameters, "
              "gradients, optimizer state, activations, weight copies and library workspaces. model = the model's own "
              "accounting: fp32 parameters + gradients + optimizer state + GEMM weight copies + planned activations.\n");
  if (peer)
    std::printf("PyTorch = bench/pytorch_gpt2.py (torch %s) on the same model, batch and AdamW; bf16 = "
                "torch.autocast('cpu', torch.bfloat16) around forward + loss (peak RSS fp32 %.0f MB, bf16 %.0f MB).\n",
                "1.13", torch_fp32.peak_rss_mb, torch_bf16.peak_rss_mb);
  // The targets, stated against what was measured (never adjusted).
  const LadderRung& bf16 = rungs[2];
  if (fp32_ms > 0 && bf16.error.empty()) {
    const double s = fp32_ms / bf16.result.ms_per_step;
    std::printf("target bf16 >= 3x fp32: %s (%.2fx)\n", s >= 3.0 ? "met" : "NOT met", s);
    if (torch_bf16.ms > 0) {
      const double q = torch_bf16.ms / bf16.result.ms_per_step;
      std::printf("target bf16 >= 2x PyTorch bf16 autocast: %s (%.2fx)\n", q >= 2.0 ? "met" : "NOT met", q);
    }
  }
  std::fflush(stdout);
  return rungs;
}

BenchResult run_bench(const BenchOptions& o) {
  if (o.ladder) {
    const std::vector<LadderRung> rungs = run_ladder(o);
    return rungs.front().result;
  }
  MPT_CHECK(o.steps > 0 && o.warmup >= 0, "--steps must be positive and --warmup >= 0");
  if (o.threads > 0) omp_set_num_threads(o.threads);
  return bench_one(o);
}

}  // namespace mptrain
