// The CPU peak estimate of peak_flops.h: /proc/cpuinfo parsing, the clock measurement and the
// formula.
#include "train/peak_flops.h"

#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "backend/cpu/amx_gemm.h"

namespace mptrain {

namespace {

constexpr double kMaxPlausibleGhz = 6.5;

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// One "processor" block of /proc/cpuinfo.
struct CpuEntry {
  std::string vendor, model_name, flags, physical_id, core_id;
  int family = -1;
  double mhz = 0.0;
};

std::vector<CpuEntry> parse_cpuinfo(const std::string& text) {
  std::vector<CpuEntry> cpus;
  std::istringstream in(text);
  std::string line;
  bool open = false;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      if (trim(line).empty()) open = false;
      continue;
    }
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "processor" || !open) {
      cpus.emplace_back();
      open = true;
      if (key == "processor") continue;
    }
    CpuEntry& c = cpus.back();
    if (key == "vendor_id")
      c.vendor = value;
    else if (key == "model name")
      c.model_name = value;
    else if (key == "flags")
      c.flags = " " + value + " ";
    else if (key == "physical id")
      c.physical_id = value;
    else if (key == "core id")
      c.core_id = value;
    else if (key == "cpu family")
      c.family = std::atoi(value.c_str());
    else if (key == "cpu MHz")
      c.mhz = std::atof(value.c_str());
  }
  return cpus;
}

bool has_flag(const CpuEntry& c, const char* flag) {
  return c.flags.find(" " + std::string(flag) + " ") != std::string::npos;
}

// fp32 FLOP/cycle/core and the reason, from the first CPU's vector extensions.
std::pair<int, std::string> fp32_flops_per_cycle(const CpuEntry& c) {
  if (has_flag(c, "avx512f")) {
    if (c.vendor == "AuthenticAMD" && c.family == 0x19) return {32, "AVX-512 on Zen 4: 2 x 256-bit FMA"};
    return {64, "AVX-512: 2 x 512-bit FMA"};
  }
  if (has_flag(c, "avx2") && has_flag(c, "fma")) return {32, "AVX2: 2 x 256-bit FMA"};
  if (has_flag(c, "avx")) return {16, "AVX: 256-bit add + multiply"};
  return {8, "SSE: 128-bit add + multiply"};
}

// FLOP/cycle/core of `precision`'s GEMMs (the table in peak_flops.h) and the reason.
std::pair<int, std::string> flops_per_cycle(const CpuEntry& c, Precision precision) {
  const auto [fp32, why] = fp32_flops_per_cycle(c);
  if (precision != Precision::Bf16) return {fp32, why};
  if (has_flag(c, "amx_bf16")) return {1024, "AMX-BF16: a 16x16x32 tile product per 16 cycles"};
  if (has_flag(c, "avx512_bf16"))
    return {2 * fp32, "AVX512-BF16: VDPBF16PS, 2 bf16 products per fp32 lane of " + why};
  return {fp32, "no bf16 units: bf16 GEMMs at the fp32 rate of " + why};
}

// "Intel(R) Xeon(R) CPU @ 2.20GHz" -> 2200 MHz; 0 when the name holds no clock.
double mhz_from_model_name(const std::string& name) {
  const size_t at = name.rfind('@');
  if (at == std::string::npos) return 0.0;
  const double ghz = std::atof(name.c_str() + at + 1);
  return name.find("GHz", at) != std::string::npos ? ghz * 1000.0 : 0.0;
}

}  // namespace

PeakFlops estimate_cpu_peak(const std::string& cpuinfo, long max_freq_khz, int threads, double measured_ghz,
                            Precision precision) {
  PeakFlops p;
  const std::vector<CpuEntry> cpus = parse_cpuinfo(cpuinfo);
  if (cpus.empty() || threads <= 0) {
    p.formula = "unknown (no /proc/cpuinfo): pass --peak-tflops";
    return p;
  }
  std::set<std::pair<std::string, std::string>> cores;
  bool have_ids = true;
  double mhz_sum = 0.0;
  int mhz_n = 0;
  for (const CpuEntry& c : cpus) {
    if (c.core_id.empty()) have_ids = false;
    cores.insert({c.physical_id, c.core_id});
    if (c.mhz > 0) {
      mhz_sum += c.mhz;
      ++mhz_n;
    }
  }
  const int physical = have_ids ? static_cast<int>(cores.size()) : static_cast<int>(cpus.size());
  const int used = std::min(threads, std::max(physical, 1));
  // A measured clock past any x86-64 core's (6.5 GHz) means the timing chain ran faster than
  // one add per cycle on this core: the reported clocks are then the better guess.
  double mhz = measured_ghz > 0 && measured_ghz <= kMaxPlausibleGhz ? measured_ghz * 1000.0 : 0.0;
  const char* clock_source = "measured";
  if (mhz <= 0 && max_freq_khz > 0) {
    mhz = max_freq_khz / 1000.0;
    clock_source = "cpufreq max";
  }
  if (mhz <= 0 && mhz_n > 0) {
    mhz = mhz_sum / mhz_n;
    clock_source = "cpu MHz";
  }
  if (mhz <= 0) {
    mhz = mhz_from_model_name(cpus.front().model_name);
    clock_source = "model name";
  }
  const auto [fpc, why] = flops_per_cycle(cpus.front(), precision);
  if (mhz <= 0) {
    p.formula = "unknown CPU clock: pass --peak-tflops";
    return p;
  }
  p.tflops = used * (mhz / 1000.0) * fpc / 1000.0;
  char buf[320];
  std::snprintf(buf, sizeof(buf), "%s: %d core%s x %.2f GHz (%s) x %d FLOP/cycle (%s)",
                precision_name(precision), used, used == 1 ? "" : "s", mhz / 1000.0, clock_source, fpc,
                why.c_str());
  p.formula = buf;
  return p;
}

double measure_core_clock_ghz() {
#if defined(__x86_64__)
  // Hand-written because no library measures the running clock: 16 dependent adds per
  // iteration take 16 cycles (add's latency is one cycle on every x86-64 core); the loop's own
  // increment and branch run beside them. The best of a few short runs skips preemptions.
  // The addend is a register, not an immediate: Golden Cove (Sapphire Rapids) folds chains of
  // immediate adds at rename, and the immediate chain read 10.9 GHz on such a host.
  constexpr long kIterations = 100000;  // 1.6 M cycles: ~0.5 ms at 3 GHz
  double best = 0.0;
  for (int run = 0; run < 5; ++run) {
    uint64_t x = 0, one = 1;
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < kIterations; ++i)
      asm volatile(
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
          : "+r"(x)
          : "r"(one));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, 16.0 * kIterations / s / 1e9);
  }
  return best;
#else
  return 0.0;
#endif
}

namespace {

// Hand-written, like the clock above: no library measures the FMA rate. kChains independent
// chains per thread, each from its own start (splat(k)) so that no compiler may merge them; `step`
// is one instruction on one chain, worth `flops` FLOPs. 16 chains cover the latency of two pipes:
// vfmadd's 4 cycles need 8, vdpbf16ps's 6 (Zen 4/5) need 12 — the ten this once ran read 83% of
// vdpbf16ps's rate on Zen 5 (348 against 419 GFLOP/s a thread, 2026-11-29) and so flattered every
// bf16 product's share of the peak. Returns FLOP/s over all OpenMP threads, the best of eight
// ~35 ms runs: on a shared VM one core can be taken for a tenth of a second, and three runs (the
// first version) once all fell inside such a gap and read half the peak (bert-base profile,
// 2026-11-27).
template <class Splat, class Step>
double fma_chains_flops_per_s(Splat splat, Step step, double flops) {
  using V = decltype(splat(0.0f));
  constexpr int kChains = 16;
  constexpr long kIterations = 12500000;  // 200 M instructions per thread: ~35 ms at 2 per cycle
  double best = 0.0;
  for (int run = 0; run < 8; ++run) {
    float sink = 0.0f;
    const auto t0 = std::chrono::steady_clock::now();
    int threads = 1;
#pragma omp parallel
    {
#pragma omp single
      threads = omp_get_num_threads();
      // Named, not an array: an array stays in memory under -O1 (the sanitizer build) and times
      // loads and stores instead (0.011 TFLOP/s there).
      V a0 = splat(0.0f), a1 = splat(1.0f), a2 = splat(2.0f), a3 = splat(3.0f), a4 = splat(4.0f);
      V a5 = splat(5.0f), a6 = splat(6.0f), a7 = splat(7.0f), a8 = splat(8.0f), a9 = splat(9.0f);
      V a10 = splat(10.0f), a11 = splat(11.0f), a12 = splat(12.0f), a13 = splat(13.0f), a14 = splat(14.0f);
      V a15 = splat(15.0f);
      for (long i = 0; i < kIterations; ++i) {
        a0 = step(a0), a1 = step(a1), a2 = step(a2), a3 = step(a3), a4 = step(a4), a5 = step(a5);
        a6 = step(a6), a7 = step(a7), a8 = step(a8), a9 = step(a9), a10 = step(a10), a11 = step(a11);
        a12 = step(a12), a13 = step(a13), a14 = step(a14), a15 = step(a15);
      }
      float out[sizeof(V) / sizeof(float)];
      for (const V& x : {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15}) {
        std::memcpy(out, &x, sizeof(out));
#pragma omp atomic
        sink += out[0];
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    volatile float keep = sink;  // the chains' results are used
    (void)keep;
    if (s > 0) best = std::max(best, static_cast<double>(kChains) * kIterations * flops * threads / s);
  }
  return best;
}

}  // namespace

double measure_fma_peak_tflops(Precision precision) {
  // bf16 products run on AMX tiles where the CPU has them (oneDNN's kernels, or ours): their rate.
  if (precision == Precision::Bf16 && cpu::amx_available()) return cpu::amx_tile_peak_flops() / 1e12;
#if defined(__AVX512BF16__)
  if (precision == Precision::Bf16) {
    const __m512bh ones = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f));
    // vdpbf16ps: 16 lanes x 2 bf16 products, each a multiply and an add.
    return fma_chains_flops_per_s([](float x) { return _mm512_set1_ps(x); },
                                  [ones](__m512 a) { return _mm512_dpbf16_ps(a, ones, ones); }, 64.0) /
           1e12;
  }
#endif
  (void)precision;  // every other GEMM runs at the fp32 FMA rate (bf16 widened where no bf16 units)
#if defined(__AVX512F__)
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  return fma_chains_flops_per_s([](float x) { return _mm512_set1_ps(x); },
                                [b, c](__m512 a) { return _mm512_fmadd_ps(a, b, c); }, 32.0) /
         1e12;
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  return fma_chains_flops_per_s([](float x) { return _mm256_set1_ps(x); },
                                [b, c](__m256 a) { return _mm256_fmadd_ps(a, b, c); }, 16.0) /
         1e12;
#else
  return 0.0;
#endif
}

PeakFlops cpu_peak_flops(int threads, double user_tflops, Precision precision) {
  if (user_tflops > 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "--peak-tflops %g", user_tflops);
    return PeakFlops{user_tflops, buf, true};
  }
  std::ifstream f("/proc/cpuinfo");
  std::stringstream text;
  text << f.rdbuf();
  long khz = 0;
  std::ifstream freq("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  if (freq) freq >> khz;
  return estimate_cpu_peak(text.str(), khz, threads, measure_core_clock_ghz(), precision);
}

}  // namespace mptrain
