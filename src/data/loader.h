// Yields B×T training windows (inputs and next-token targets) from token shards,
// walking the shards in name order and wrapping around at the end (epoch + 1).
// With several processes, rank r takes the r-th B×T slice of each global window of
// B×T×world tokens, so the global batch is the same whatever the world size.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/shard.h"

namespace mptrain {

struct LoaderPosition {
  int64_t shard = 0;   // index into the sorted shard list
  int64_t offset = 0;  // token offset of the next global window in that shard
  int64_t epoch = 0;
};

class TokenLoader {
 public:
  // pattern: a glob of shard files. Every token is checked against vocab_size when the
  // shards are opened; a shard too small for one global window is an error.
  TokenLoader(const std::string& pattern, int B, int T, int vocab_size, int rank = 0, int world = 1);

  // Fills inputs[B*T] and targets[B*T] with the next window and advances.
  void next(int* inputs, int* targets);

  LoaderPosition position() const { return pos_; }
  void set_position(const LoaderPosition& pos);
  void reset() { set_position({}); }
  size_t num_shards() const { return shards_.size(); }
  size_t total_tokens() const;
  int B() const { return B_; }
  int T() const { return T_; }

 private:
  std::vector<Shard> shards_;
  int B_, T_, vocab_size_, rank_, world_;
  LoaderPosition pos_;
};

}  // namespace mptrain
