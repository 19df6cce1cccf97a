// Window loader over memory-mapped shards: sequential or shuffled (data/loader.h).
#include "data/loader.h"

#include <algorithm>
#include <limits>
#include <span>

#include "core/error.h"
#include "core/rng_int.h"

namespace mptrain {

namespace {
// The counter-based RNG's stream of the sequence order (core/rng.h): + the epoch.
constexpr uint64_t kSequenceOrderStream = 0x746f6b656e73ull;  // "tokens"

// Every id must index the embedding table. Checked once, up front (a parallel scan runs at
// memory speed), so bad data fails before training starts rather than hours into a run.
void check_token_range(const Shard& shard, int vocab_size) {
  shard.visit([&](auto tokens) {
    const auto limit = static_cast<uint32_t>(vocab_size);
    size_t first_bad = tokens.size();
#pragma omp parallel for reduction(min : first_bad) schedule(static)
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] >= limit && i < first_bad) first_bad = i;
    if (first_bad < tokens.size())
      throw Error("token id " + std::to_string(tokens[first_bad]) + " at position " +
                  std::to_string(first_bad) + " of shard '" + shard.path() +
                  "' is out of range for a vocabulary of " + std::to_string(vocab_size));
  });
}

// The window [start, start + n] of a shard: inputs the first n ids, targets the n after the first.
void copy_window(const Shard& shard, size_t start, size_t n, int* inputs, int* targets) {
  shard.visit([&](auto tokens) {
    for (size_t i = 0; i < n; ++i) {
      inputs[i] = static_cast<int>(tokens[start + i]);
      targets[i] = static_cast<int>(tokens[start + i + 1]);
    }
  });
}
}  // namespace

TokenLoader::TokenLoader(const std::string& pattern, int B, int T, int vocab_size, int rank, int world,
                         const TokenOrder& order)
    : B_(B), T_(T), vocab_size_(vocab_size), rank_(rank), world_(world), order_(order) {
  MPT_CHECK(B > 0 && T > 0, "loader: batch size and sequence length must be positive");
  MPT_CHECK(world > 0 && rank >= 0 && rank < world, "loader: bad rank/world");
  const size_t need = static_cast<size_t>(B) * T * world + 1;
  for (const auto& path : glob_shards(pattern)) {
    Shard shard(path);
    if (shard.size() < need)
      throw Error("shard '" + path + "' holds " + std::to_string(shard.size()) +
                  " tokens, fewer than one batch of " + std::to_string(B) + "x" + std::to_string(T) +
                  (world > 1 ? "x" + std::to_string(world) : "") + "+1 = " + std::to_string(need) +
                  "; use a smaller --batch/--seq or more data");
    check_token_range(shard, vocab_size);
    shards_.push_back(std::move(shard));
  }
  if (order_.shuffle) {
    first_sequence_.assign(1, 0);
    for (const Shard& shard : shards_)
      first_sequence_.push_back(first_sequence_.back() + (shard.size() - 1) / T);
    MPT_CHECK(num_sequences() <= std::numeric_limits<uint32_t>::max(),
              "--shuffle: " + std::to_string(num_sequences()) + " sequences of " + std::to_string(T) +
                  " tokens are more than one epoch's order holds (2^32); use a longer --seq");
    pos_.shuffled = true;
    build_order(0);
  }
}

// The permutation of every shard's sequences for `epoch` (kept until the epoch changes).
void TokenLoader::build_order(int64_t epoch) {
  if (order_epoch_ == epoch) return;
  sequence_order_.resize(num_sequences());
  for (size_t i = 0; i < sequence_order_.size(); ++i) sequence_order_[i] = static_cast<uint32_t>(i);
  shuffle_counter_based(std::span<uint32_t>(sequence_order_), order_.seed,
                        kSequenceOrderStream + static_cast<uint64_t>(epoch));
  order_epoch_ = epoch;
}

size_t TokenLoader::total_tokens() const {
  size_t n = 0;
  for (const auto& s : shards_) n += s.size();
  return n;
}

void TokenLoader::set_position(const LoaderPosition& pos) {
  const auto order_name = [](bool shuffled) { return shuffled ? "shuffled (--shuffle)" : "sequential"; };
  MPT_CHECK(pos.shuffled == order_.shuffle,
            std::string("the data position was taken in ") + order_name(pos.shuffled) +
                " order, and this run reads its data in " + order_name(order_.shuffle) + " order; " +
                (pos.shuffled ? "pass --shuffle" : "leave out --shuffle") + " to resume it");
  if (order_.shuffle) {
    MPT_CHECK(pos.epoch >= 0 && pos.index >= 0 && static_cast<uint64_t>(pos.index) <= num_sequences(),
              "loader position (index " + std::to_string(pos.index) + ", epoch " + std::to_string(pos.epoch) +
                  ") does not fit the " + std::to_string(num_sequences()) +
                  " sequences of the data; was the checkpoint made with other shards or another --seq?");
    pos_ = pos;
    build_order(pos.epoch);
    return;
  }
  MPT_CHECK(pos.shard >= 0 && static_cast<size_t>(pos.shard) < shards_.size() && pos.offset >= 0 &&
                static_cast<size_t>(pos.offset) < shards_[pos.shard].size(),
            "loader position (shard " + std::to_string(pos.shard) + ", offset " + std::to_string(pos.offset) +
                ") does not fit the data; was the checkpoint made with other shards?");
  pos_ = pos;
}

void TokenLoader::next(int* inputs, int* targets) {
  if (order_.shuffle)
    next_shuffled(inputs, targets);
  else
    next_sequential(inputs, targets);
}

void TokenLoader::next_shuffled(int* inputs, int* targets) {
  const uint64_t per_step = static_cast<uint64_t>(B_) * world_;
  if (static_cast<uint64_t>(pos_.index) + per_step > num_sequences()) {  // drop_last, then a new order
    ++pos_.epoch;
    pos_.index = 0;
    build_order(pos_.epoch);
  }
  for (int b = 0; b < B_; ++b) {
    const uint64_t seq =
        sequence_order_[static_cast<size_t>(pos_.index) + static_cast<size_t>(rank_) * B_ + b];
    const size_t s =
        static_cast<size_t>(std::upper_bound(first_sequence_.begin(), first_sequence_.end(), seq) -
                            first_sequence_.begin()) -
        1;
    copy_window(shards_[s], (seq - first_sequence_[s]) * T_, static_cast<size_t>(T_),
                inputs + static_cast<size_t>(b) * T_, targets + static_cast<size_t>(b) * T_);
  }
  pos_.index += static_cast<int64_t>(per_step);
}

void TokenLoader::next_sequential(int* inputs, int* targets) {
  const size_t window = static_cast<size_t>(B_) * T_;
  const size_t global = window * world_;
  const Shard* shard = &shards_[pos_.shard];
  if (static_cast<size_t>(pos_.offset) + global + 1 > shard->size()) {
    pos_.offset = 0;
    if (static_cast<size_t>(++pos_.shard) == shards_.size()) {
      pos_.shard = 0;
      ++pos_.epoch;
    }
    shard = &shards_[pos_.shard];
  }
  copy_window(*shard, static_cast<size_t>(pos_.offset) + window * rank_, window, inputs, targets);
  pos_.offset += static_cast<int64_t>(global);
}

}  // namespace mptrain
