// Counter-based random numbers (a SplitMix64-style hash of seed and counter), so
// the value at index i does not depend on how work is split across threads, and
// a run's random state is just (seed, counter) — trivially checkpointed.
#pragma once
#include <cmath>
#include <cstdint>

namespace mptrain {

inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from (seed, stream, index).
inline float uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t h = mix64(mix64(seed ^ mix64(stream)) + index);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller from two counter-based uniforms.
inline float normal01(uint64_t seed, uint64_t stream, uint64_t index) {
  double u1 = (static_cast<double>(mix64(mix64(seed ^ mix64(stream)) + 2 * index) >> 11) + 0.5) *
              (1.0 / 9007199254740992.0);
  double u2 = static_cast<double>(mix64(mix64(seed ^ mix64(stream)) + 2 * index + 1) >> 11) *
              (1.0 / 9007199254740992.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// A sequential generator whose whole state is (seed, counter).
struct Rng {
  uint64_t seed = 0;
  uint64_t counter = 0;
  float uniform(uint64_t stream = 0) { return uniform01(seed, stream, counter++); }
};

}  // namespace mptrain
