// The gradient-ready ranges from a parameter table (grad_ready.h).
#include "backend/cuda/grad_ready.h"

#include <algorithm>

#include "core/error.h"

namespace mptrain::cuda {

GradRange prefixed_range(const ParamTable& table, const std::vector<std::string>& prefixes,
                         const std::string& who) {
  GradRange r{table.total(), 0};
  size_t numel = 0;
  std::string names;
  for (const std::string& p : prefixes) names += (names.empty() ? "" : ", ") + p + "*";
  for (const ParamSpec& s : table.specs()) {
    const bool match = std::any_of(prefixes.begin(), prefixes.end(),
                                   [&](const std::string& p) { return s.name.compare(0, p.size(), p) == 0; });
    if (!match) continue;
    r.first = std::min(r.first, s.offset);
    r.second = std::max(r.second, s.offset + s.numel);
    numel += s.numel;
  }
  // Tensors do not overlap, so the matching ones fill [first, second) exactly when their sizes
  // add up to its length; anything else between them makes the sum fall short.
  MPT_CHECK(numel > 0 && numel == r.second - r.first,
            who + " the parameters named " + names + " are not one contiguous range of the table");
  return r;
}

void check_top_down_tiling(const std::vector<GradRange>& ranges, size_t n, const std::string& message) {
  bool ok = !ranges.empty() && ranges.front().second == n && ranges.back().first == 0;
  for (size_t i = 0; ok && i < ranges.size(); ++i)
    ok = ranges[i].first < ranges[i].second && (i == 0 || ranges[i].second == ranges[i - 1].first);
  MPT_CHECK(ok, message);
}

}  // namespace mptrain::cuda
