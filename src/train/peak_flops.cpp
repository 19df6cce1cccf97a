// The CPU peak estimate of peak_flops.h: /proc/cpuinfo parsing and the formula.
#include "train/peak_flops.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

namespace mptrain {

namespace {

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

// FLOP/cycle/core and the reason, from the first CPU's vector extensions.
std::pair<int, std::string> flops_per_cycle(const CpuEntry& c) {
  if (has_flag(c, "avx512f")) {
    if (c.vendor == "AuthenticAMD" && c.family == 0x19) return {32, "AVX-512 on Zen 4: 2 x 256-bit FMA"};
    return {64, "AVX-512: 2 x 512-bit FMA"};
  }
  if (has_flag(c, "avx2") && has_flag(c, "fma")) return {32, "AVX2: 2 x 256-bit FMA"};
  if (has_flag(c, "avx")) return {16, "AVX: 256-bit add + multiply"};
  return {8, "SSE: 128-bit add + multiply"};
}

// "Intel(R) Xeon(R) CPU @ 2.20GHz" -> 2200 MHz; 0 when the name holds no clock.
double mhz_from_model_name(const std::string& name) {
  const size_t at = name.rfind('@');
  if (at == std::string::npos) return 0.0;
  const double ghz = std::atof(name.c_str() + at + 1);
  return name.find("GHz", at) != std::string::npos ? ghz * 1000.0 : 0.0;
}

}  // namespace

PeakFlops estimate_cpu_peak(const std::string& cpuinfo, long max_freq_khz, int threads) {
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
  double mhz = max_freq_khz > 0 ? max_freq_khz / 1000.0 : 0.0;
  const char* clock_source = "cpufreq max";
  if (mhz <= 0 && mhz_n > 0) {
    mhz = mhz_sum / mhz_n;
    clock_source = "cpu MHz";
  }
  if (mhz <= 0) {
    mhz = mhz_from_model_name(cpus.front().model_name);
    clock_source = "model name";
  }
  const auto [fpc, why] = flops_per_cycle(cpus.front());
  if (mhz <= 0) {
    p.formula = "unknown CPU clock: pass --peak-tflops";
    return p;
  }
  p.tflops = used * (mhz / 1000.0) * fpc / 1000.0;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%d core%s x %.2f GHz (%s) x %d FLOP/cycle (%s)", used,
                used == 1 ? "" : "s", mhz / 1000.0, clock_source, fpc, why.c_str());
  p.formula = buf;
  return p;
}

PeakFlops cpu_peak_flops(int threads, double user_tflops) {
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
  return estimate_cpu_peak(text.str(), khz, threads);
}

}  // namespace mptrain
