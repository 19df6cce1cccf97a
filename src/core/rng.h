// Counter-based random numbers (a SplitMix64-style hash of seed and counter), so
// the value at index i does not depend on how work is split across threads, and
// a run's random state is just (seed, counter) — trivially checkpointed.
// Every function is MPT_HD (core/dtype.h), callable in CUDA kernels: the integer hashes and
// uniforms give the same bits there; normal01 uses the device's log/cos (within a few ulp).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/dtype.h"

namespace mptrain {

MPT_HD uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from (seed, stream, index).
MPT_HD float uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t h = mix64(mix64(seed ^ mix64(stream)) + index);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller from two counter-based uniforms.
MPT_HD float normal01(uint64_t seed, uint64_t stream, uint64_t index) {
  double u1 = (static_cast<double>(mix64(mix64(seed ^ mix64(stream)) + 2 * index) >> 11) + 0.5) *
              (1.0 / 9007199254740992.0);
  double u2 = static_cast<double>(mix64(mix64(seed ^ mix64(stream)) + 2 * index + 1) >> 11) *
              (1.0 / 9007199254740992.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// A 53-bit uniform in [0, 1) for row n of label-sampling call (seed, counter): Sophia's
// sampled cross-entropy on every backend draws row n's label from it. Finer than uniform01's
// 24 bits, so that tokens far down a 50k-way softmax keep their share of the draws. The salt
// gives label sampling a stream of its own (weight init and the sampler share the run's seed).
MPT_HD double label_uniform(uint64_t seed, uint64_t counter, uint64_t n) {
  constexpr uint64_t kSalt = 0x50f1a6e55a3b1e5ull;
  const uint64_t h = mix64(mix64(seed ^ mix64(counter ^ kSalt)) + n);
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);
}

// A sequential generator whose whole state is (seed, counter).
struct Rng {
  uint64_t seed = 0;
  uint64_t counter = 0;
  float uniform(uint64_t stream = 0) { return uniform01(seed, stream, counter++); }
};

}  // namespace mptrain
