// Shared helpers for the backend op tests: seeded random inputs, NaN-poisoned output buffers
// with sentinels after them (to catch unwritten elements and out-of-bounds writes), a
// comparison against a float64 reference with per-test tolerances (|got - ref| <= atol +
// rtol·|ref|, non-finite values always fail), central finite differences, and a scoped
// OpenMP thread count for determinism checks.
#pragma once
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"

namespace mptrain::test {

struct Tol {
  double atol;
  double rtol;
};

inline constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

inline std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * normal01(seed, 1, i);
  return v;
}

inline std::vector<float> uniform(size_t n, uint64_t seed, float lo, float hi) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * uniform01(seed, 2, i);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// n floats followed by kGuard sentinel floats. The sentinel is compared bit for bit.
class Guarded {
 public:
  explicit Guarded(size_t n, float fill = kPoison) : n_(n), buf_(n + kGuard, kSentinel) {
    std::fill(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(n), fill);
  }
  explicit Guarded(const std::vector<float>& v) : Guarded(v.size()) {
    std::copy(v.begin(), v.end(), buf_.begin());
  }
  float* data() { return buf_.data(); }
  const float* data() const { return buf_.data(); }
  size_t size() const { return n_; }
  float operator[](size_t i) const { return buf_[i]; }
  std::vector<float> values() const { return {buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(n_)}; }
  bool guards_intact() const {
    for (size_t i = n_; i < buf_.size(); ++i)
      if (std::memcmp(&buf_[i], &kSentinel, sizeof(float)) != 0) return false;
    return true;
  }

 private:
  static constexpr size_t kGuard = 64;
  static constexpr float kSentinel = -7.0e33f;
  size_t n_;
  std::vector<float> buf_;
};

inline ::testing::AssertionResult all_close(const float* got, const double* ref, size_t n, Tol tol,
                                            const std::string& what) {
  size_t bad = 0;
  double max_err = 0.0;
  std::ostringstream first;
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i], r = ref[i];
    const double err = std::fabs(g - r);
    const bool ok = std::isfinite(g) && err <= tol.atol + tol.rtol * std::fabs(r);
    if (std::isfinite(err)) max_err = std::max(max_err, err);
    if (!ok) {
      if (bad < 5) first << "\n    [" << i << "] got " << g << " want " << r;
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << n << " elements outside atol " << tol.atol << " + rtol "
         << tol.rtol << " (max finite abs err " << max_err << ")" << first.str();
}

inline ::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<double>& ref,
                                            Tol tol, const std::string& what) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << what << ": size mismatch";
  return all_close(got.data(), ref.data(), got.size(), tol, what);
}

inline ::testing::AssertionResult bit_identical(const std::vector<float>& a, const std::vector<float>& b,
                                                const std::string& what) {
  if (a.size() != b.size() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0)
    return ::testing::AssertionFailure() << what << ": results differ bitwise";
  return ::testing::AssertionSuccess();
}

// Central difference of f (a double-valued function of the whole vector x) along x[i].
template <class F>
double finite_difference(F&& f, std::vector<double>& x, size_t i, double h = 1e-6) {
  const double keep = x[i];
  x[i] = keep + h;
  const double up = f(x);
  x[i] = keep - h;
  const double down = f(x);
  x[i] = keep;
  return (up - down) / (2.0 * h);
}

// Indices 0, n-1 and a spread of others, for finite-difference spot checks.
inline std::vector<size_t> sample_indices(size_t n, size_t count, uint64_t seed) {
  std::vector<size_t> idx{0, n - 1};
  for (size_t k = 0; k < count; ++k)
    idx.push_back(static_cast<size_t>(uniform01(seed, 3, k) * static_cast<float>(n)) % n);
  return idx;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Runs the enclosing scope with a given OpenMP thread count, restoring the previous one.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ScopedThreads() { omp_set_num_threads(saved_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int saved_;
};

}  // namespace mptrain::test
