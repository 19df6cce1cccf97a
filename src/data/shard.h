// Token shards in llm.c's format: a header of 256 little-endian int32
// (magic 20240520, version 1, token count, rest zero), then uint16 tokens.
// Readers memory-map the file and validate the header and size before use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mptrain {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

// The token count of a whole shard held in memory (header + tokens), after checking the magic,
// the version and that the size matches the count; throws Error naming `path` otherwise.
// Shard calls it on its mapping; the fuzz target (fuzz/shard_fuzz.cpp) on raw bytes.
size_t parse_shard_header(std::span<const std::byte> bytes, const std::string& path);

// A read-only, memory-mapped shard. Throws Error naming the file on a bad magic,
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
  std::span<const uint16_t> tokens() const { return {tokens_, num_tokens_}; }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  size_t num_tokens_ = 0;
};

// Writes one shard atomically (temporary name, fsync, rename). Token ids must be < 65536.
void write_shard(const std::string& path, std::span<const uint16_t> tokens);

// Shard files matching a glob pattern, sorted by name; throws if none match.
std::vector<std::string> glob_shards(const std::string& pattern);

}  // namespace mptrain
