#include "backend/op_profile.h"

#include <algorithm>

namespace mptrain {

OpProfile::Stamp OpProfile::now() {
  timespec cpu{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  return {std::chrono::steady_clock::now(),
          static_cast<double>(cpu.tv_sec) + 1e-9 * static_cast<double>(cpu.tv_nsec)};
}

void OpProfile::add(OpWork work, const Stamp& start, const Stamp& end) {
  OpProfileRow& row = rows_[work.label];
  if (row.label.empty()) row.label = std::move(work.label);
  ++row.calls;
  row.wall_s += std::chrono::duration<double>(end.wall - start.wall).count();
  row.cpu_s += end.cpu_s - start.cpu_s;
  row.flops += work.flops;
  row.bytes += work.bytes;
}

std::vector<OpProfileRow> OpProfile::rows() const {
  std::vector<OpProfileRow> out;
  out.reserve(rows_.size());
  for (const auto& [label, row] : rows_) out.push_back(row);
  std::stable_sort(out.begin(), out.end(),
                   [](const OpProfileRow& a, const OpProfileRow& b) { return a.wall_s > b.wall_s; });
  return out;
}

}  // namespace mptrain
