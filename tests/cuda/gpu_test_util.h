// Shared helpers for the GPU op tests: the skip rule (no GPU = SKIPPED, never passed), one
// Context per test process, random inputs rounded to a storage type, uploads/downloads in
// fp32 terms, and the comparison against the CPU op (relative norm error; any non-finite
// value, e.g. a poisoned element a kernel never wrote, fails).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cuda/context.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/dispatch.h"
#include "backend/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "cuda/device_array.h"

#define SKIP_WITHOUT_GPU()                                                                      \
  if (::mptrain::cuda_device_count() == 0)                                                      \
  GTEST_SKIP() << "no CUDA GPU on this machine (cudaGetDeviceCount reports none): GPU op test " \
                  "not run"

namespace mptrain::gputest {

// One Context for the whole test process (created on first use, only when a GPU exists).
inline cuda::Context& ctx() {
  static std::unique_ptr<cuda::Context> c;
  if (!c) c = std::make_unique<cuda::Context>(0);
  return *c;
}

// One CPU backend context for the reference ops the GPU results are compared with.
inline cpu::Context& cpu_ctx() {
  static cpu::Context c;
  return c;
}

inline std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * normal01(seed, 7, i);
  return v;
}

template <class T>
T to_storage(float x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else if constexpr (std::is_same_v<T, Bf16>)
    return f32_to_bf16(x);
  else
    return f32_to_f16(x);
}
inline float to_float(float x) { return x; }
inline float to_float(Bf16 x) { return bf16_to_f32(x); }
inline float to_float(Fp16 x) { return f16_to_f32(x); }

// v rounded to T (in place): the CPU reference then sees exactly what the GPU stores.
template <class T>
std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = to_float(to_storage<T>(x));
  return v;
}

template <class T>
cuda::DeviceBuffer<T> upload(const std::vector<float>& v) {
  std::vector<T> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = to_storage<T>(v[i]);
  return cuda::DeviceBuffer<T>(h, ctx());
}

// A device buffer of n elements, every byte 0xFF (NaN in fp32, bf16 and fp16).
template <class T>
cuda::DeviceBuffer<T> poisoned(size_t n) {
  cuda::DeviceBuffer<T> b(n);
  b.poison(ctx());
  return b;
}

template <class T>
std::vector<float> download(const cuda::DeviceBuffer<T>& b) {
  const std::vector<T> h = b.download(ctx());
  std::vector<float> v(h.size());
  for (size_t i = 0; i < h.size(); ++i) v[i] = to_float(h[i]);
  return v;
}

// sqrt(Σ(got-ref)²/Σref²); +inf when got has a non-finite element where ref is finite.
inline double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
  if (got.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) && std::isfinite(ref[i])) return std::numeric_limits<double>::infinity();
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The tolerances: fp32 1e-5, bf16/fp16 1e-2 (relative norm). TF32 (1e-3) is per test.
template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-2;
}

template <class T>
std::string type_name() {
  return storage_name(cuda::storage_of<T>());
}

using StorageTypes = ::testing::Types<float, Bf16, Fp16>;

// f must throw mptrain::Error whose message contains `text` (the op's "[name]" prefix, a size).
inline void expect_error_contains(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

}  // namespace mptrain::gputest
