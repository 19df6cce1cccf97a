// The op profile: every op a backend runs, timed as it runs (wall clock and the process's CPU
// time), with the work it did — FLOPs of its products, bytes of the tensors it read and wrote —
// collected per op and shape, so that `mptrain bench --profile` can say where a step's time goes
// and how close each op comes to the machine's FLOP/s or memory bandwidth (PyTorch's profiler
// table, for our ops).
//
// Times are only meaningful where an op has finished when its call returns: the CPU backend, or
// a GPU's once the backend waits for the device around each profiled op (Backend::set_profile).
// The process's CPU time counts
// every thread's, so it is the measure that a loaded machine distorts least: other processes
// slow an op's wall clock but not the CPU time of its own work (OpenMP's spin-waits are in both).
#pragma once
#include <chrono>
#include <cstdint>
#include <ctime>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mptrain {

// What one op call does: its row of the profile (op name, and for a product its shape), the
// FLOPs of its products (0 for an op without) and the bytes of the tensors it reads and writes
// once (the least memory traffic it can have).
struct OpWork {
  std::string label;
  double flops = 0.0;
  double bytes = 0.0;
};

struct OpProfileRow {
  std::string label;
  std::int64_t calls = 0;
  double wall_s = 0.0, cpu_s = 0.0;
  double flops = 0.0, bytes = 0.0;
};

class OpProfile {
 public:
  // Runs f() and adds its times and work to work.label's row.
  template <class F>
  decltype(auto) time(OpWork work, F&& f) {
    const Stamp start = now();
    struct Finish {  // also when f throws: a half-run op still took its time
      OpProfile* p;
      OpWork* w;
      Stamp s;
      ~Finish() { p->add(std::move(*w), s, now()); }
    } finish{this, &work, start};
    return f();
  }
  // The rows, slowest (wall clock) first.
  std::vector<OpProfileRow> rows() const;

 private:
  struct Stamp {
    std::chrono::steady_clock::time_point wall;
    double cpu_s;
  };
  static Stamp now();
  void add(OpWork work, const Stamp& start, const Stamp& end);
  std::map<std::string, OpProfileRow> rows_;
};

}  // namespace mptrain
