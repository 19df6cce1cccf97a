// Fuzzes the safetensors reader (io/safetensors.h) on raw file bytes: the 8-byte header length,
// the JSON header (dtypes, shapes, data_offsets, __metadata__) and the offsets into the data.
// A rejected file must throw mptrain::Error; anything else (another exception, an
// out-of-bounds read, UB) is a finding. Every accepted tensor's bytes are read in full, so a
// view that pointed outside the input would be caught by ASan.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes: ASan flags any read past the end of the file.
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    mptrain::SafetensorsContents c = mptrain::parse_safetensors(bytes, "'fuzz input'");
    uint8_t sum = 0;
    for (const auto& [name, t] : c.tensors) {
      if (t.nbytes != t.numel() * mptrain::dtype_size(t.dtype)) __builtin_trap();
      for (size_t i = 0; i < t.nbytes; ++i) sum ^= static_cast<uint8_t>(t.data[i]);
    }
    volatile uint8_t sink = sum;
    (void)sink;
  } catch (const mptrain::Error&) {
  }
  return 0;
}
