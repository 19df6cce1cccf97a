// Fuzzes the token-shard header check (data/shard.h) on raw file bytes: magic, version, token
// count against the file size. A rejected file must throw mptrain::Error; an accepted one must
// hold exactly its token count, all of which are read (ASan catches a count past the input).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "core/error.h"
#include "data/shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const size_t count = mptrain::parse_shard_header(bytes, "fuzz input");
    if (mptrain::kShardHeaderBytes + count * sizeof(uint16_t) != size) __builtin_trap();
    uint16_t max_token = 0;
    for (size_t i = 0; i < count; ++i) {
      uint16_t t;
      std::memcpy(&t, data + mptrain::kShardHeaderBytes + i * sizeof(t), sizeof(t));
      max_token = t > max_token ? t : max_token;
    }
    volatile uint16_t sink = max_token;
    (void)sink;
  } catch (const mptrain::Error&) {
  }
  return 0;
}
