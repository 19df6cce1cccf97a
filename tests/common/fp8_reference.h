// A float64 FP8 quantizer written from the formats' definition, independent of core/fp8.h's bit
// manipulation: every finite value of the format listed, the nearest taken, ties to the even
// pattern, past the largest value (once rounded) an overflow. For tests/core/test_fp8.cpp and the
// conformance cases of the FP8 ops.
#pragma once
#include <cmath>
#include <limits>
#include <vector>

#include "core/fp8.h"

namespace mptrain::test {

// Every finite non-negative value of the format, by pattern (0 .. max_code): (1 + m/2^M)·2^(e - bias),
// or m·2^(1 - bias - M) for e = 0.
inline std::vector<double> fp8_finite_values(Fp8Format f) {
  const Fp8Spec s = fp8_spec(f);
  std::vector<double> v;
  for (int code = 0; code <= s.max_code; ++code) {
    const int e = code >> s.mantissa_bits, m = code & ((1 << s.mantissa_bits) - 1);
    v.push_back(e == 0 ? std::ldexp(m, 1 - s.bias - s.mantissa_bits)
                       : std::ldexp(1.0 + std::ldexp(m, -s.mantissa_bits), e - s.bias));
  }
  return v;
}

// The pattern of |x|, or -1 for an overflow (the grid continues one step above the largest value,
// at pattern max_code + 1, even or odd as a pattern's mantissa would be).
inline int fp8_reference_code(double x, Fp8Format f) {
  const std::vector<double> v = fp8_finite_values(f);
  const double a = std::fabs(x);
  const double next = v.back() + (v.back() - v[v.size() - 2]);
  if (a >= next) return -1;
  int best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (int code = 0; code <= static_cast<int>(v.size()); ++code) {
    const double value = code < static_cast<int>(v.size()) ? v[static_cast<size_t>(code)] : next;
    const double d = std::fabs(a - value);
    if (d < best_d || (d == best_d && code % 2 == 0)) best = code, best_d = d;
  }
  return best == static_cast<int>(v.size()) ? -1 : best;
}

// The value x takes in the format under saturation (NaN stays NaN, overflow → ±largest).
inline double fp8_reference_round(double x, Fp8Format f) {
  if (std::isnan(x)) return x;
  const int code = std::isinf(x) ? -1 : fp8_reference_code(x, f);
  const double v = code >= 0 ? fp8_finite_values(f)[static_cast<size_t>(code)] : fp8_spec(f).max_value;
  return std::signbit(x) ? -v : v;
}

}  // namespace mptrain::test
