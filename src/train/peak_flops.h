// The peak FLOP/s that MFU (model FLOPs utilisation) is measured against.
//
// A CPU's true peak cannot be read from the system, so it is estimated at run time:
//
//   peak = cores × clock × FLOP/cycle/core (of the precision's GEMMs)
//
//   cores            the OpenMP threads of the run, at most the physical cores (two hardware
//                    threads of one core share its FMA units)
//   clock            measured: a chain of dependent integer adds (one per cycle on every x86-64
//                    core) timed on this thread, best of a few ~1 ms runs, so turbo is counted
//                    (virtual machines report only the base clock: on the 2-core EPYC VM of
//                    docs/BENCHMARKS.md's records /proc/cpuinfo says 2.10 GHz while the cores run at
//                    ~3.2 GHz, which made MFU read over 100%). Without a measurement: cpufreq's
//                    cpuinfo_max_freq, else the mean "cpu MHz" of /proc/cpuinfo, else the
//                    "@ x.xxGHz" of the model name.
//   FLOP/cycle/core  fp32, tf32 (emulated through fp32 GEMMs) and fp16 (emulated exactly through
//                    fp32 on CPUs without AVX512-FP16 GEMMs): 2 (an FMA is a multiply and an
//                    add) × fp32 lanes × FMA units:
//                    AVX-512 on Intel and on AMD Zen 5 or later: 2 × 16 × 2 = 64;
//                    AVX-512 on AMD Zen 4 (256-bit datapaths): 2 × 8 × 2 = 32;
//                    AVX2 + FMA: 2 × 8 × 2 = 32; AVX without FMA: 8 + 8 = 16; otherwise 8.
//                    bf16: AMX-BF16 (amx_bf16): 1024 (one 16×16×32 tile product, 16384 FLOP,
//                    per 16 cycles); AVX512-BF16 (avx512_bf16): twice the fp32 figure (a
//                    VDPBF16PS does two bf16 products per fp32 lane); otherwise the fp32 figure.
//
// All-core clocks under AVX-512 load and shared hosts still move the real figure, which is why
// `--peak-tflops` overrides the estimate. On a GPU the peak is the data-sheet number for the
// precision in use (the CUDA backend supplies it).
#pragma once
#include <string>

#include "precision/precision.h"

namespace mptrain {

struct PeakFlops {
  double tflops = 0.0;      // the peak, in TFLOP/s
  std::string formula;      // how it was obtained, e.g. "2 cores x 2.10 GHz x 64 FLOP/cycle (AVX-512 FMA)"
  bool user_given = false;  // from --peak-tflops
};

// The estimate above for `threads` threads running `precision`'s GEMMs, from the text of
// /proc/cpuinfo, the max frequency in kHz from cpufreq (0 when unknown) and a measured clock
// in GHz (0 when not measured). Pure: the testable part.
PeakFlops estimate_cpu_peak(const std::string& cpuinfo, long max_freq_khz, int threads,
                            double measured_ghz = 0.0, Precision precision = Precision::Fp32);

// The clock this thread's core runs at now, in GHz (the dependent-add chain above; a few ms).
// 0 where it cannot be measured (not x86-64).
double measure_core_clock_ghz();

// The peak measured instead of estimated: FMA instructions of the precision's GEMMs (fp32: the
// widest vfmadd this build targets; bf16 with AVX512-BF16: vdpbf16ps; bf16 where the CPU has AMX
// tiles: tile products on loaded tiles, backend/cpu/amx_gemm.h), independent chains on every
// OpenMP thread, the best of a few runs — what the cores sustain under that load, after any clock
// drop the estimate's single-thread clock does not see. 0 when this build has no such instructions.
double measure_fma_peak_tflops(Precision precision = Precision::Fp32);

// Reads /proc/cpuinfo and cpufreq and measures the clock on this machine. user_tflops > 0 wins
// over the estimate (for every precision).
PeakFlops cpu_peak_flops(int threads, double user_tflops, Precision precision = Precision::Fp32);

// Achieved FLOP/s over the peak (0 when the peak is unknown).
inline double mfu(double achieved_flops_per_s, const PeakFlops& peak) {
  return peak.tflops > 0 ? achieved_flops_per_s / (peak.tflops * 1e12) : 0.0;
}

}  // namespace mptrain
