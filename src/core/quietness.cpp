// The quietness measurement of quietness.h: /proc/stat, /proc/loadavg and getrusage.
#include "core/quietness.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace mptrain {

namespace {

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); }

double rusage_seconds(int who) {
  rusage u{};
  if (getrusage(who, &u) != 0) return 0.0;
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

std::string read_file(const char* path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

bool parse_proc_stat(const std::string& stat, double ticks_per_s, double& busy_s, double& steal_s) {
  std::istringstream in(stat);
  std::string label;
  in >> label;
  if (label != "cpu" || ticks_per_s <= 0) return false;
  // user nice system idle iowait irq softirq steal (guest time is already inside user)
  double f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (double& x : f)
    if (!(in >> x)) return false;
  busy_s = (f[0] + f[1] + f[2] + f[5] + f[6]) / ticks_per_s;
  steal_s = f[7] / ticks_per_s;
  return true;
}

CpuSample sample_cpu() {
  CpuSample s;
  parse_proc_stat(read_file("/proc/stat"), static_cast<double>(sysconf(_SC_CLK_TCK)), s.busy_s, s.steal_s);
  s.own_s = rusage_seconds(RUSAGE_SELF) + rusage_seconds(RUSAGE_CHILDREN);
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return s;
}

double load_average_1min() {
  double load = 0.0;
  std::istringstream(read_file("/proc/loadavg")) >> load;
  return load;
}

Quietness quietness_between(const CpuSample& before, const CpuSample& after, double load_before) {
  Quietness q;
  q.load_before = load_before;
  q.wall_s = after.wall_s - before.wall_s;
  if (q.wall_s <= 0) return q;
  // The two counters tick at different granularities (clock ticks vs microseconds): clamp the
  // small negative differences that leaves on an otherwise idle machine.
  const double others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s);
  q.others_cores = std::max(0.0, others / q.wall_s);
  q.steal_cores = std::max(0.0, (after.steal_s - before.steal_s) / q.wall_s);
  return q;
}

std::string Quietness::describe() const {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "load average %.2f before; during the %.0f s run others used %.2f cores (steal %.2f)",
                load_before, wall_s, others_cores, steal_cores);
  return buf;
}

std::string Quietness::warning() const {
  if (!busy()) return "";
  char buf[160];
  std::snprintf(buf, sizeof(buf), "machine busy (others used %.2f cores%s): ratio not reliable", others_cores,
                steal_cores > kBusyCores ? ", plus steal" : "");
  return buf;
}

QuietnessMeter::QuietnessMeter() : start_(sample_cpu()), load_before_(load_average_1min()) {}

Quietness QuietnessMeter::finish() const { return quietness_between(start_, sample_cpu(), load_before_); }

}  // namespace mptrain
