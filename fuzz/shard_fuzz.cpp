// Fuzzes the token-shard header check (data/shard.h) on raw file bytes: magic, version, token
// count against the file size, for both token widths. A rejected file must throw mptrain::Error;
// an accepted one must hold exactly its token count, all of which are read (ASan catches a count
// past the input).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "core/error.h"
#include "data/shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const mptrain::ShardHeader h = mptrain::parse_shard_header(bytes, "fuzz input");
    if (h.token_bytes != 2 && h.token_bytes != 4) __builtin_trap();
    if (mptrain::kShardHeaderBytes + h.num_tokens * h.token_bytes != size) __builtin_trap();
    uint32_t max_token = 0;
    for (size_t i = 0; i < h.num_tokens; ++i) {
      uint32_t t = 0;  // little-endian: the low bytes of a uint32 are a uint16's
      std::memcpy(&t, data + mptrain::kShardHeaderBytes + i * h.token_bytes, h.token_bytes);
      max_token = t > max_token ? t : max_token;
    }
    volatile uint32_t sink = max_token;
    (void)sink;
  } catch (const mptrain::Error&) {
  }
  return 0;
}
