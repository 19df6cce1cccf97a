// The peak FLOP/s that MFU (model FLOPs utilisation) is measured against.
//
// A CPU's true fp32 peak cannot be read from the system, so it is estimated at run time:
//
//   peak = cores × clock × FLOP/cycle/core
//
//   cores            the OpenMP threads of the run, at most the physical cores (two hardware
//                    threads of one core share its FMA units)
//   clock            the highest clock the kernel reports (cpufreq's cpuinfo_max_freq), else
//                    the mean "cpu MHz" of /proc/cpuinfo, else the "@ x.xxGHz" of the model name
//   FLOP/cycle/core  2 (an FMA is a multiply and an add) × fp32 lanes × FMA units:
//                    AVX-512 on Intel and on AMD Zen 5 or later: 2 × 16 × 2 = 64;
//                    AVX-512 on AMD Zen 4 (256-bit datapaths): 2 × 8 × 2 = 32;
//                    AVX2 + FMA: 2 × 8 × 2 = 32; AVX without FMA: 8 + 8 = 16; otherwise 8.
//
// All-core turbo clocks and AVX-512 frequency offsets move the real figure by tens of
// percent either way, which is why `--peak-tflops` overrides the estimate. On a GPU the
// peak is the data-sheet number for the precision in use (the CUDA backend supplies it).
#pragma once
#include <string>

namespace mptrain {

struct PeakFlops {
  double tflops = 0.0;      // the peak, in TFLOP/s
  std::string formula;      // how it was obtained, e.g. "2 cores x 2.10 GHz x 64 FLOP/cycle (AVX-512 FMA)"
  bool user_given = false;  // from --peak-tflops
};

// The estimate above for `threads` threads, from the text of /proc/cpuinfo and the
// max frequency in kHz from cpufreq (0 when unknown). Pure: the testable part.
PeakFlops estimate_cpu_peak(const std::string& cpuinfo, long max_freq_khz, int threads);

// Reads /proc/cpuinfo and cpufreq for this machine. user_tflops > 0 wins over the estimate.
PeakFlops cpu_peak_flops(int threads, double user_tflops);

// Achieved FLOP/s over the peak (0 when the peak is unknown).
inline double mfu(double achieved_flops_per_s, const PeakFlops& peak) {
  return peak.tflops > 0 ? achieved_flops_per_s / (peak.tflops * 1e12) : 0.0;
}

}  // namespace mptrain
