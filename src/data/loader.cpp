// Sequential window loader over memory-mapped shards.
#include "data/loader.h"

#include "core/error.h"

namespace mptrain {

namespace {
// Every id must index the embedding table. Checked once, up front (a parallel scan runs at
// memory speed), so bad data fails before training starts rather than hours into a run.
void check_token_range(const Shard& shard, int vocab_size) {
  const auto tokens = shard.tokens();
  size_t first_bad = tokens.size();
#pragma omp parallel for reduction(min : first_bad) schedule(static)
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] >= vocab_size && i < first_bad) first_bad = i;
  if (first_bad < tokens.size())
    throw Error("token id " + std::to_string(tokens[first_bad]) + " at position " + std::to_string(first_bad) +
                " of shard '" + shard.path() + "' is out of range for a vocabulary of " + std::to_string(vocab_size));
}
}  // namespace

TokenLoader::TokenLoader(const std::string& pattern, int B, int T, int vocab_size, int rank, int world)
    : B_(B), T_(T), vocab_size_(vocab_size), rank_(rank), world_(world) {
  MPT_CHECK(B > 0 && T > 0, "loader: batch size and sequence length must be positive");
  MPT_CHECK(world > 0 && rank >= 0 && rank < world, "loader: bad rank/world");
  const size_t need = static_cast<size_t>(B) * T * world + 1;
  for (const auto& path : glob_shards(pattern)) {
    Shard shard(path);
    if (shard.size() < need)
      throw Error("shard '" + path + "' holds " + std::to_string(shard.size()) + " tokens, fewer than one batch of " +
                  std::to_string(B) + "x" + std::to_string(T) + (world > 1 ? "x" + std::to_string(world) : "") +
                  "+1 = " + std::to_string(need) + "; use a smaller --batch/--seq or more data");
    check_token_range(shard, vocab_size);
    shards_.push_back(std::move(shard));
  }
}

size_t TokenLoader::total_tokens() const {
  size_t n = 0;
  for (const auto& s : shards_) n += s.size();
  return n;
}

void TokenLoader::set_position(const LoaderPosition& pos) {
  MPT_CHECK(pos.shard >= 0 && static_cast<size_t>(pos.shard) < shards_.size() && pos.offset >= 0 &&
                static_cast<size_t>(pos.offset) < shards_[pos.shard].size(),
            "loader position (shard " + std::to_string(pos.shard) + ", offset " + std::to_string(pos.offset) +
                ") does not fit the data; was the checkpoint made with other shards?");
  pos_ = pos;
}

void TokenLoader::next(int* inputs, int* targets) {
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
  const size_t start = static_cast<size_t>(pos_.offset) + window * rank_;
  const auto tokens = shard->tokens();
  for (size_t i = 0; i < window; ++i) {
    inputs[i] = tokens[start + i];
    targets[i] = tokens[start + i + 1];
  }
  pos_.offset += static_cast<int64_t>(global);
}

}  // namespace mptrain
