// A corpus file's bytes as a stream, decompressed on the fly where its name says it is compressed
// (.zst: zstd, .gz: gzip, .xz: xz; concatenated frames and members included), through the
// libraries Debian ships (libzstd, zlib, liblzma): what lets `prepare` read a shard of many
// gigabytes in bounded memory. A truncated or corrupt stream is one Error naming the file and the
// byte offset of the compressed input where it was found.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace mptrain {

enum class Compression { None, Zstd, Gzip, Xz };

// By the file name's last extension (.zst, .zstd, .gz, .xz), else None.
Compression compression_of(std::string_view path);
// The name without that extension ("a.jsonl.zst" -> "a.jsonl"), or the name itself.
std::string_view without_compression_suffix(std::string_view path);

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Up to `n` bytes of the (decompressed) content into `out`; 0 only at its end.
  virtual size_t read(char* out, size_t n) = 0;
  // Bytes of the file itself consumed so far (compressed bytes for a compressed file): the
  // progress display's measure.
  virtual uint64_t file_bytes_read() const = 0;
};

// Opens `path`, decompressing as compression_of(path) says. Error naming the file when it cannot
// be opened.
std::unique_ptr<ByteStream> open_byte_stream(const std::string& path);

}  // namespace mptrain
