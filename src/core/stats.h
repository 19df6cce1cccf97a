// Small statistics every benchmark and report shares.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

namespace mptrain {

// The median (the middle value, or the mean of the two middle ones); NaN for no values. What
// every bench reports of its step times, CPU and GPU alike, and the run report of its rates.
inline double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace mptrain
