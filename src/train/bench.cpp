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

// Runs the peer and returns its median ms/step, parsed from its "RESULT ms_per_step=…" line.
double run_peer(const BenchOptions& o, int threads, int vocab) {
  const std::string script = o.peer_script.empty() ? default_peer_script() : o.peer_script;
  if (script.empty() || !fs::exists(script)) {
    std::printf("peer: bench/pytorch_gpt2.py not found; skipping the PyTorch comparison\n");
    return 0.0;
  }
  const std::string cmd = "ATEN_CPU_CAPABILITY=avx512 " + o.python + " " + script + " --preset " + o.preset +
                          " --batch " + std::to_string(o.batch) + " --seq " + std::to_string(o.seq) + " --steps " +
                          std::to_string(o.steps) + " --warmup " + std::to_string(o.warmup) +
                          " --precision fp32 --threads " + std::to_string(threads) + " --vocab " +
                          std::to_string(vocab) + " 2>&1";
  if (!o.quiet) std::printf("peer: %s\n", cmd.c_str());
  std::fflush(stdout);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  MPT_CHECK(pipe != nullptr, "cannot start the PyTorch peer");
  std::array<char, 4096> buf{};
  double ms = 0.0;
  while (std::fgets(buf.data(), buf.size(), pipe)) {
    if (!o.quiet) std::printf("  [torch] %s", buf.data());
    const char* r = std::strstr(buf.data(), "RESULT ms_per_step=");
    if (r) ms = std::atof(r + std::strlen("RESULT ms_per_step="));
  }
  const int rc = ::pclose(pipe);
  if (rc != 0 || ms <= 0.0) {
    std::printf("peer: PyTorch run failed (exit status %d); no ratio\n", rc);
    return 0.0;
  }
  return ms;
}

}  // namespace

BenchResult run_bench(const BenchOptions& o) {
  MPT_CHECK(o.steps > 0 && o.warmup >= 0, "--steps must be positive and --warmup >= 0");
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const int threads = omp_get_max_threads();
  const Gpt2Config config = gpt2_preset(o.preset, o.vocab_multiple);
  MPT_CHECK(o.seq <= config.block_size, "--seq " + std::to_string(o.seq) + " is longer than the model's context of " +
                                            std::to_string(config.block_size));
  cpu::Context ctx;
  Gpt2 model(config, ctx);
  model.init_weights(1337);
  model.plan(o.batch, o.seq);
  const size_t n = static_cast<size_t>(o.batch) * o.seq;
  const OptimizerKind kind = parse_optimizer_kind(o.optimizer);
  std::unique_ptr<Optimizer> optimizer =
      make_optimizer(kind, model.table(), AdamWHyper{}, SophiaHyper{}, static_cast<double>(n), 1337);
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
    std::printf("bench: %s (%zu params), batch %d x %d, fp32, %s, %d threads, %d warmup + %d timed steps\n",
                o.preset.c_str(), model.num_params(), o.batch, o.seq, optimizer->name(), threads, o.warmup, o.steps);
    std::printf("MFU against a peak of %.3f TFLOP/s = %s\n", peak.tflops, peak.formula.c_str());
  }
  Progress progress({.label = "bench",
                     .total = static_cast<double>(o.warmup + o.steps),
                     .mode = o.quiet ? ProgressMode::kNone : o.progress,
                     .out = stdout});
  std::vector<double> times;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    const StepStats st = train_step(model, *optimizer, next, o.batch, o.seq, 1, 1e-4f, 1.0f, s + 1, inputs.data(),
                                    targets.data());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    char line[160], status[160];
    std::snprintf(line, sizeof(line), "  step %d%s: %.1f ms (loss %.4f)%s", s + 1, s < o.warmup ? " (warmup)" : "", ms,
                  st.loss, st.curvature ? " + Hessian estimate" : "");
    std::snprintf(status, sizeof(status), "step %d/%d | %.1f ms | %s tok/s | MFU %.2f%%", s + 1, o.warmup + o.steps,
                  ms, format_si(tokens / (ms / 1e3)).c_str(), mfu(flops / (ms / 1e3), peak) * 100.0);
    if (progress.mode() != ProgressMode::kNone) progress.print(line);
    progress.draw(s + 1, status);
    if (s >= o.warmup) times.push_back(ms);
  }
  BenchResult r;
  r.ms_per_step = median(times);
  r.tokens_per_s = tokens / (r.ms_per_step / 1e3);
  r.tflops = flops / (r.ms_per_step / 1e3) / 1e12;
  progress.finish();
  std::printf("mptrain: %.1f ms/step | %.0f tok/s | %.3f TFLOP/s | MFU %.2f%% (median of %d)\n", r.ms_per_step,
              r.tokens_per_s, r.tflops, mfu(r.tflops * 1e12, peak) * 100.0, o.steps);
  if (o.peer && kind != OptimizerKind::AdamW) {
    std::printf("peer: skipped (bench/pytorch_gpt2.py runs AdamW; no like-for-like %s peer)\n", optimizer->name());
  } else if (o.peer) {
    r.peer_ms_per_step = run_peer(o, threads, config.padded_vocab_size);
    if (r.peer_ms_per_step > 0.0) {
      std::printf("pytorch: %.1f ms/step | %.0f tok/s\n", r.peer_ms_per_step, tokens / (r.peer_ms_per_step / 1e3));
      std::printf("ratio: mptrain is %.2fx the speed of PyTorch (fp32, same model, batch and optimizer)\n",
                  r.peer_ms_per_step / r.ms_per_step);
    }
  }
  std::fflush(stdout);
  return r;
}

}  // namespace mptrain
