// How quiet the machine was around a benchmark, so that a ratio taken while other work ran is
// flagged instead of trusted. On these shared 2-core machines PyTorch's OpenMP threads collapse
// under load and once turned a 1.8x ratio into 11x; the load average after a run says nothing
// (the benchmark's own threads raise it). So: the 1-minute load average before the run, and
// during it the CPU time that other processes took = the machine's busy time (/proc/stat) minus
// this process's and its waited-for children's CPU time (getrusage), per second of wall time,
// i.e. in cores. Hypervisor steal (other virtual machines) is reported beside it.
#pragma once
#include <string>

namespace mptrain {

// The machine's CPU counters at one instant, in seconds.
struct CpuSample {
  double busy_s = 0.0;   // user + nice + system + irq + softirq, all CPUs (/proc/stat's "cpu" line)
  double steal_s = 0.0;  // time the hypervisor gave our virtual CPUs to others
  double own_s = 0.0;    // this process + its reaped children: user + system (getrusage)
  double wall_s = 0.0;   // a monotonic clock
};

struct Quietness {
  double load_before = 0.0;   // 1-minute load average when the run started
  double others_cores = 0.0;  // CPU taken by other processes during the run, in cores
  double steal_cores = 0.0;
  double wall_s = 0.0;
  // More than a tenth of a core taken by others (or by other virtual machines): a ratio from
  // this run is not reliable.
  static constexpr double kBusyCores = 0.1;
  bool busy() const { return others_cores > kBusyCores || steal_cores > kBusyCores; }
  // "load average 0.21 before; during the 212 s run others used 0.03 cores (steal 0.00)"
  std::string describe() const;
  // "" on a quiet machine, else "machine busy (others used 0.42 cores): ratio not reliable".
  std::string warning() const;
};

// Parses /proc/stat's first ("cpu ...") line given in `stat`, in clock ticks of `ticks_per_s`;
// false when it is not there.
bool parse_proc_stat(const std::string& stat, double ticks_per_s, double& busy_s, double& steal_s);
// What others took between two samples (pure arithmetic: the unit-tested part).
Quietness quietness_between(const CpuSample& before, const CpuSample& after, double load_before);

// Reads the counters when constructed; finish() reads them again.
class QuietnessMeter {
 public:
  QuietnessMeter();
  Quietness finish() const;

 private:
  CpuSample start_;
  double load_before_ = 0.0;
};

CpuSample sample_cpu();
double load_average_1min();  // 0 when /proc/loadavg cannot be read

}  // namespace mptrain
