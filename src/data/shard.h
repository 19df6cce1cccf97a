// Token shards in llm.c's formats: a header of 256 little-endian int32 (magic, version, token
// count, rest zero), then the tokens: GPT-2's (magic 20240520, version 1) stores uint16 ids, Llama
// 3's (magic 20240801, version 7: llm.c's dev/data for vocabularies past 65,536 tokens) uint32.
// Readers memory-map the file and validate the header and size before use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mptrain {

inline constexpr int32_t kShardMagic = 20240520;  // uint16 ids
inline constexpr int32_t kShardVersion = 1;
inline constexpr int32_t kWideShardMagic = 20240801;  // uint32 ids
inline constexpr int32_t kWideShardVersion = 7;
inline constexpr size_t kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

struct ShardHeader {
  size_t num_tokens = 0;
  size_t token_bytes = 2;  // 2: uint16 ids, 4: uint32
};

// The header of a whole shard held in memory (header + tokens), after checking the magic, the
// version and that the size matches the count; throws Error naming `path` otherwise.
// Shard calls it on its mapping; the fuzz target (fuzz/shard_fuzz.cpp) on raw bytes.
ShardHeader parse_shard_header(std::span<const std::byte> bytes, const std::string& path);

// A read-only, memory-mapped shard of either width. Throws Error naming the file on a bad magic,
// version, or a size that disagrees with the header's token count.
class Shard {
 public:
  explicit Shard(const std::string& path);
  ~Shard();
  Shard(Shard&& other) noexcept;
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;
  Shard& operator=(Shard&&) = delete;

  const std::string& path() const { return path_; }
  size_t size() const { return num_tokens_; }
  size_t token_bytes() const { return token_bytes_; }
  // Calls f with the tokens as a std::span<const uint16_t> or std::span<const uint32_t>, as stored:
  // one branch per call, so loops over the ids run at the width's own speed.
  template <class F>
  decltype(auto) visit(F&& f) const {
    if (token_bytes_ == 2)
      return f(std::span<const uint16_t>(static_cast<const uint16_t*>(tokens_), num_tokens_));
    return f(std::span<const uint32_t>(static_cast<const uint32_t*>(tokens_), num_tokens_));
  }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const void* tokens_ = nullptr;
  size_t num_tokens_ = 0;
  size_t token_bytes_ = 2;
};

// Writes one shard atomically (temporary name, fsync, rename): uint16 ids in GPT-2's format,
// uint32 ids in the wide one.
void write_shard(const std::string& path, std::span<const uint16_t> tokens);
void write_shard(const std::string& path, std::span<const uint32_t> tokens);

// Writes one shard as its ids come, in bounded memory (a buffer of 1 MiB, whatever the shard's
// size): a zero header, the ids in the shard's width (uint16 in GPT-2's format, uint32 in the wide
// one), then, at finish(), the header with the count and an fsync. For files in a staging folder
// that the caller moves into place once complete (prepare): one that is never finished is left
// with a zero header, which every reader refuses. Errors name the file.
class ShardWriter {
 public:
  ShardWriter(std::string path, bool wide);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  void append(std::span<const int> ids);
  size_t size() const { return count_; }
  void finish();

 private:
  void flush_buffer();
  std::string path_;
  bool wide_;
  int fd_ = -1;
  size_t count_ = 0;
  std::vector<std::byte> buf_;
};

// Shard files matching a glob pattern, sorted by name; throws if none match.
std::vector<std::string> glob_shards(const std::string& pattern);

}  // namespace mptrain
