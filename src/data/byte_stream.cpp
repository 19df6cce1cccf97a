// Compressed and plain corpus files as byte streams (data/byte_stream.h).
#include "data/byte_stream.h"

#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace mptrain {

namespace {

// Each compression by its file name's suffix.
struct Suffix {
  std::string_view text;
  Compression compression;
};
constexpr Suffix kSuffixes[] = {
    {".zst", Compression::Zstd}, {".zstd", Compression::Zstd}, {".gz", Compression::Gzip}, {".xz", Compression::Xz}};

// The file's raw bytes, read in chunks of 1 MiB.
class FileInput {
 public:
  explicit FileInput(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "rb")) {
    if (!f_) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  }
  ~FileInput() {
    if (f_) std::fclose(f_);
  }
  FileInput(const FileInput&) = delete;
  FileInput& operator=(const FileInput&) = delete;
  size_t read(char* out, size_t n) {
    const size_t got = std::fread(out, 1, n, f_);
    if (got < n && std::ferror(f_)) throw Error("reading '" + path_ + "' failed: " + std::strerror(errno));
    consumed_ += got;
    return got;
  }
  uint64_t consumed() const { return consumed_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* f_;
  uint64_t consumed_ = 0;
};

class PlainStream final : public ByteStream {
 public:
  explicit PlainStream(const std::string& path) : in_(path) {}
  size_t read(char* out, size_t n) override { return in_.read(out, n); }
  uint64_t file_bytes_read() const override { return in_.consumed(); }

 private:
  FileInput in_;
};

// What every decompressor shares: a buffer of compressed input refilled from the file, and the
// refusal of a stream that ends inside a frame.
class Decompressor : public ByteStream {
 public:
  explicit Decompressor(const std::string& path) : in_(path), buf_(1 << 20) {}
  uint64_t file_bytes_read() const override { return in_.consumed(); }

 protected:
  // Refills the input buffer when it is used up; false at the end of the file.
  bool refill(const char*& next, size_t& avail) {
    if (avail > 0) return true;
    avail = in_.read(buf_.data(), buf_.size());
    next = buf_.data();
    return avail > 0;
  }
  [[noreturn]] void fail(const char* format, const std::string& why, size_t unread) const {
    throw Error("'" + in_.path() + "': " + format + " stream " + why + ", detected at byte " +
                std::to_string(in_.consumed() - unread) + " of the file");
  }
  FileInput in_;
  std::vector<char> buf_;
};

class ZstdStream final : public Decompressor {
 public:
  explicit ZstdStream(const std::string& path) : Decompressor(path), ds_(ZSTD_createDStream()) {
    if (!ds_) throw Error("zstd: out of memory opening '" + path + "'");
  }
  ~ZstdStream() override { ZSTD_freeDStream(ds_); }
  size_t read(char* out, size_t n) override {
    ZSTD_outBuffer o{out, n, 0};
    while (o.pos == 0) {
      const bool more = refill(in_next_, in_avail_);
      if (!more && !in_frame_) return 0;
      // With no input left this still flushes what the decoder holds; nothing flushed and a frame
      // unfinished: the file ends inside it.
      // At most one block's worth of input a call: zstd leaves the input position where the call
      // began when it finds an error, so the offset the error names is that of this chunk's end.
      const size_t chunk = std::min<size_t>(in_avail_, ZSTD_BLOCKSIZE_MAX);
      ZSTD_inBuffer i{in_next_, chunk, 0};
      const size_t r = ZSTD_decompressStream(ds_, &o, &i);
      if (ZSTD_isError(r)) fail("zstd", std::string("corrupt (") + ZSTD_getErrorName(r) + ")", in_avail_ - chunk);
      in_next_ += i.pos, in_avail_ -= i.pos;
      in_frame_ = r != 0;  // 0: a frame just ended
      if (!more && o.pos == 0 && in_frame_) fail("zstd", "truncated (the file ends inside a frame)", 0);
    }
    return o.pos;
  }

 private:
  ZSTD_DStream* ds_;
  const char* in_next_ = nullptr;
  size_t in_avail_ = 0;
  bool in_frame_ = false;
};

class GzipStream final : public Decompressor {
 public:
  explicit GzipStream(const std::string& path) : Decompressor(path) {
    std::memset(&z_, 0, sizeof(z_));
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) throw Error("zlib: cannot start inflating '" + path + "'");
  }
  ~GzipStream() override { inflateEnd(&z_); }
  size_t read(char* out, size_t n) override {
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(n);
    while (z_.avail_out == n) {
      bool more = true;
      if (z_.avail_in == 0) {
        const char* next = nullptr;
        size_t avail = 0;
        more = refill(next, avail);
        z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(next));
        z_.avail_in = static_cast<uInt>(avail);
      }
      if (!more && !in_member_) break;
      if (z_.avail_in > 0) in_member_ = true;
      const uInt before = z_.avail_out;
      const int r = inflate(&z_, Z_NO_FLUSH);
      if (r == Z_STREAM_END) {  // a member ended: another may follow (concatenated .gz files)
        in_member_ = false;
        inflateReset(&z_);
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        fail("gzip", std::string("corrupt (") + (z_.msg ? z_.msg : zError(r)) + ")", z_.avail_in);
      } else if (!more && z_.avail_out == before) {
        fail("gzip", "truncated (the file ends inside a member)", 0);
      }
    }
    return n - z_.avail_out;
  }

 private:
  z_stream z_;
  bool in_member_ = false;
};

// liblzma has no message for its codes.
const char* lzma_problem(lzma_ret r) {
  switch (r) {
    case LZMA_FORMAT_ERROR:
      return "not an xz stream";
    case LZMA_OPTIONS_ERROR:
      return "unsupported options";
    case LZMA_DATA_ERROR:
      return "compressed data is corrupt";
    case LZMA_MEM_ERROR:
    case LZMA_MEMLIMIT_ERROR:
      return "out of memory";
    default:
      return "liblzma error";
  }
}

class XzStream final : public Decompressor {
 public:
  explicit XzStream(const std::string& path) : Decompressor(path) {
    if (lzma_stream_decoder(&s_, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
      throw Error("liblzma: cannot start decoding '" + path + "'");
  }
  ~XzStream() override { lzma_end(&s_); }
  size_t read(char* out, size_t n) override {
    s_.next_out = reinterpret_cast<uint8_t*>(out);
    s_.avail_out = n;
    while (s_.avail_out == n && !done_) {
      lzma_action action = LZMA_RUN;
      if (s_.avail_in == 0) {
        const char* next = nullptr;
        size_t avail = 0;
        if (refill(next, avail)) {
          s_.next_in = reinterpret_cast<const uint8_t*>(next);
          s_.avail_in = avail;
        } else {
          action = LZMA_FINISH;
        }
      }
      const lzma_ret r = lzma_code(&s_, action);
      if (r == LZMA_STREAM_END) {
        done_ = true;
      } else if (r == LZMA_BUF_ERROR && action == LZMA_FINISH) {
        fail("xz", "truncated (the file ends inside a block)", 0);
      } else if (r != LZMA_OK) {
        fail("xz", std::string("corrupt (") + lzma_problem(r) + ")", s_.avail_in);
      }
    }
    return n - s_.avail_out;
  }

 private:
  lzma_stream s_ = LZMA_STREAM_INIT;
  bool done_ = false;
};

}  // namespace

Compression compression_of(std::string_view path) {
  for (const Suffix& s : kSuffixes)
    if (path.ends_with(s.text)) return s.compression;
  return Compression::None;
}

std::string_view without_compression_suffix(std::string_view path) {
  for (const Suffix& s : kSuffixes)
    if (path.ends_with(s.text)) return path.substr(0, path.size() - s.text.size());
  return path;
}

std::unique_ptr<ByteStream> open_byte_stream(const std::string& path) {
  switch (compression_of(path)) {
    case Compression::Zstd:
      return std::make_unique<ZstdStream>(path);
    case Compression::Gzip:
      return std::make_unique<GzipStream>(path);
    case Compression::Xz:
      return std::make_unique<XzStream>(path);
    case Compression::None:
      break;
  }
  return std::make_unique<PlainStream>(path);
}

}  // namespace mptrain
