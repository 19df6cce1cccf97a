// Yields B×T training windows (inputs and next-token targets) from token shards, in one of two
// orders (TokenOrder):
//  - sequential (the default): the shards in name order, each global window of B×T×world
//    consecutive tokens in turn, wrapping around at the end (epoch + 1); rank r takes the r-th
//    B×T slice of each global window;
//  - shuffled (`train --shuffle`): the data cut into sequences of T+1 tokens at stride T (each
//    shard on its own: no sequence spans two shards), all shards' sequences in one new random
//    order every epoch, drawn from (seed, epoch); each step takes the next B×world of them, rank r
//    the r-th B, and an epoch's last sequences that do not fill a step are left out (PyTorch's
//    drop_last). llm.c's shuffling loader permutes the shards and whole global batches within
//    each; single sequences mix documents from the whole corpus into every step, as nanoGPT's
//    random windows do, but without drawing one twice in an epoch.
// Either way the global batch is the same whatever the world size.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/shard.h"

namespace mptrain {

struct TokenOrder {
  bool shuffle = false;
  uint64_t seed = 0;  // the shuffled order's (the run's --seed)
};

// Where the next global window starts. Sequential: (shard, offset); shuffled: index into the
// epoch's order of sequences.
struct LoaderPosition {
  int64_t shard = 0;   // index into the sorted shard list
  int64_t offset = 0;  // token offset of the next global window in that shard
  int64_t epoch = 0;
  bool shuffled = false;
  int64_t index = 0;  // shuffled: sequences of this epoch already taken
};

class TokenLoader {
 public:
  // pattern: a glob of shard files. Every token is checked against vocab_size when the
  // shards are opened; a shard too small for one global window is an error.
  TokenLoader(const std::string& pattern, int B, int T, int vocab_size, int rank = 0, int world = 1,
              const TokenOrder& order = {});

  // Fills inputs[B*T] and targets[B*T] with the next window and advances.
  void next(int* inputs, int* targets);

  LoaderPosition position() const { return pos_; }
  // Throws Error when pos does not fit these shards, or was taken in the other order.
  void set_position(const LoaderPosition& pos);
  void reset() { set_position({.shuffled = order_.shuffle}); }
  size_t num_shards() const { return shards_.size(); }
  size_t total_tokens() const;
  // Shuffled: the sequences of T+1 tokens an epoch orders (0 when sequential).
  size_t num_sequences() const { return first_sequence_.empty() ? 0 : first_sequence_.back(); }
  bool shuffled() const { return order_.shuffle; }
  int B() const { return B_; }
  int T() const { return T_; }

 private:
  void next_sequential(int* inputs, int* targets);
  void next_shuffled(int* inputs, int* targets);
  void build_order(int64_t epoch);
  std::vector<Shard> shards_;
  int B_, T_, vocab_size_, rank_, world_;
  TokenOrder order_;
  LoaderPosition pos_;
  // Shuffled: shard s holds sequences [first_sequence_[s], first_sequence_[s + 1]); sequence_order_
  // is epoch order_epoch_'s permutation of them.
  std::vector<uint64_t> first_sequence_;
  std::vector<uint32_t> sequence_order_;
  int64_t order_epoch_ = -1;
};

}  // namespace mptrain
