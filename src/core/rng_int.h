// Integer draws from the counter-based RNG of core/rng.h (host only): 64 raw bits at (seed,
// stream, index), a uniform integer below n, and a Fisher–Yates permutation — the data loaders'
// per-epoch orders and BERT's masking draws.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "core/rng.h"

namespace mptrain {

// 64 random bits at (seed, stream, index): the hash uniform01 is built on.
inline uint64_t bits64(uint64_t seed, uint64_t stream, uint64_t index) {
  return mix64(mix64(seed ^ mix64(stream)) + index);
}

// Uniform integer in [0, n) (n > 0) from 64 random bits r, by Lemire's multiply-shift; the bias
// (n / 2^64) is negligible.
inline uint64_t below(uint64_t r, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(r) * n) >> 64);
}

// Fisher–Yates over `order` with draws from (seed, stream): the same permutation on every
// platform and standard library (std::shuffle's algorithm is the library's own). The loaders use
// stream = a constant of their own + the epoch.
template <class T>
void shuffle_counter_based(std::span<T> order, uint64_t seed, uint64_t stream) {
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[below(bits64(seed, stream, i), i)]);
}

}  // namespace mptrain
