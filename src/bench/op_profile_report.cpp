#include "bench/op_profile_report.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace mptrain {

double measure_memory_bandwidth_gbs() {
  // Hand-written because no packaged library measures it (STREAM is a source file to copy): a
  // buffer well beyond every cache, first touched by the threads that copy it (their pages).
  constexpr size_t kFloats = size_t{64} << 20;  // 256 MiB each side
  std::vector<float> src(kFloats), dst(kFloats);
  float* s = src.data();
  float* d = dst.data();
  const auto n = static_cast<std::int64_t>(kFloats);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) s[i] = static_cast<float>(i & 1023), d[i] = 0.0f;
  double best_s = 1e30;
  for (int run = 0; run < 4; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) d[i] = s[i];
    best_s = std::min(best_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  volatile float sink = d[n / 3];  // the copy is used
  (void)sink;
  return 2.0 * static_cast<double>(kFloats) * sizeof(float) / best_s / 1e9;
}

namespace {

// A product: an op whose work is counted in FLOPs (the GEMMs and the attention).
bool is_product(const OpProfileRow& r) { return r.flops > 0.0; }

void print_row(const char* label, double calls, double wall_ms, double step_ms, double cpu_ms, double flops,
               double bytes, double seconds, const PeakFlops& peak, double bandwidth_gbs) {
  const double gflops = seconds > 0 ? flops / seconds / 1e9 : 0.0;
  const double gbs = seconds > 0 ? bytes / seconds / 1e9 : 0.0;
  char calls_text[16] = "";
  if (calls > 0) std::snprintf(calls_text, sizeof(calls_text), "%.0f", calls);
  char limit[48];
  if (flops > 0)
    std::snprintf(limit, sizeof(limit), "%8.1f GFLOP/s %5.1f%% peak", gflops,
                  peak.tflops > 0 ? 100.0 * gflops / (peak.tflops * 1e3) : 0.0);
  else if (bytes > 0)
    std::snprintf(limit, sizeof(limit), "%8.2f GB/s    %5.1f%% bw  ", gbs,
                  bandwidth_gbs > 0 ? 100.0 * gbs / bandwidth_gbs : 0.0);
  else
    std::snprintf(limit, sizeof(limit), "%s", "");
  std::printf("  %-44s %6s %9.1f %6.1f%% %9.1f  %s\n", label, calls_text, wall_ms, 100.0 * wall_ms / step_ms,
              cpu_ms, limit);
}

}  // namespace

void print_op_profile(const OpProfile& profile, int steps, double step_wall_s, double model_flops,
                      const PeakFlops& estimate, double fma_tflops, double bandwidth_gbs) {
  const std::vector<OpProfileRow> rows = profile.rows();
  const double per = 1.0 / std::max(steps, 1);
  const double step_ms = 1e3 * step_wall_s * per;
  PeakFlops peak = estimate;
  std::printf("\nop profile: %d step%s, %.1f ms/step\n", steps, steps == 1 ? "" : "s", step_ms);
  if (fma_tflops > 0) {
    std::printf(
        "  products against the FMA peak measured now, %.3f TFLOP/s (%.0f%% of the MFU estimate, %s)\n",
        fma_tflops, 100.0 * fma_tflops / estimate.tflops, estimate.formula.c_str());
    peak.tflops = fma_tflops;
  } else {
    std::printf("  products against the MFU estimate, %.3f TFLOP/s (%s)\n", estimate.tflops,
                estimate.formula.c_str());
  }
  std::printf(
      "  other ops against the memory copy measured now, %.1f GB/s (read + written; read-heavy ops "
      "can pass 100%%)\n",
      bandwidth_gbs);
  std::printf("  %-44s %6s %9s %7s %9s  %s\n", "op (products: rows x inner x columns)", "calls", "ms/step",
              "step", "CPU-ms", "achieved");
  OpProfileRow products{"all products (GEMMs, attention)"}, others{"all other ops"};
  for (const OpProfileRow& r : rows) {
    print_row(r.label.c_str(), static_cast<double>(r.calls) * per, 1e3 * r.wall_s * per, step_ms,
              1e3 * r.cpu_s * per, r.flops * per, r.bytes * per, r.wall_s * per, peak, bandwidth_gbs);
    OpProfileRow& sum = is_product(r) ? products : others;
    sum.calls += r.calls, sum.wall_s += r.wall_s, sum.cpu_s += r.cpu_s, sum.flops += r.flops,
        sum.bytes += r.bytes;
  }
  std::printf("\n");
  for (const OpProfileRow* s : {&products, &others})
    print_row(s->label.c_str(), static_cast<double>(s->calls) * per, 1e3 * s->wall_s * per, step_ms,
              1e3 * s->cpu_s * per, s->flops * per, s->bytes * per, s->wall_s * per, peak, bandwidth_gbs);
  const double outside_ms = step_ms - 1e3 * (products.wall_s + others.wall_s) * per;
  print_row("between the ops (host code, data, loop)", 0, outside_ms, step_ms, 0, 0, 0, 0, peak, 0);
  const double tflops = model_flops / (step_ms / 1e3) / 1e12;
  std::printf("the step: %.3f TFLOP/s of model FLOPs = %.1f%% of the %s peak\n", tflops,
              100.0 * tflops / peak.tflops, fma_tflops > 0 ? "measured FMA" : "estimated");
}

}  // namespace mptrain
