// Memory-mapped reading and atomic writing of llm.c-format token shards.
#include "data/shard.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "io/fileutil.h"

namespace mptrain {

namespace {

std::string truncated(const std::string& path, size_t bytes) {
  return "shard '" + path + "' is truncated: " + std::to_string(bytes) + " bytes, smaller than the " +
         std::to_string(kShardHeaderBytes) + "-byte header";
}

}  // namespace

ShardHeader parse_shard_header(std::span<const std::byte> bytes, const std::string& path) {
  if (bytes.size() < kShardHeaderBytes) throw Error(truncated(path, bytes.size()));
  int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof(header));
  auto fail = [&](const std::string& why) { throw Error("shard '" + path + "': " + why); };
  const bool wide = header[0] == kWideShardMagic;
  if (header[0] != kShardMagic && !wide)
    fail("bad magic " + std::to_string(header[0]) + " (expected " + std::to_string(kShardMagic) + " or " +
         std::to_string(kWideShardMagic) + "); not a token shard");
  const int32_t version = wide ? kWideShardVersion : kShardVersion;
  if (header[1] != version)
    fail("unsupported version " + std::to_string(header[1]) + " (expected " + std::to_string(version) +
         " with magic " + std::to_string(header[0]) + ")");
  if (header[2] < 0) fail("negative token count " + std::to_string(header[2]));
  ShardHeader h;
  h.num_tokens = static_cast<size_t>(header[2]);
  h.token_bytes = wide ? sizeof(uint32_t) : sizeof(uint16_t);
  const size_t expected = kShardHeaderBytes + h.num_tokens * h.token_bytes;  // count < 2^31: no overflow
  if (bytes.size() != expected)
    fail("size " + std::to_string(bytes.size()) + " bytes does not match the header's " +
         std::to_string(h.num_tokens) + " tokens of " + std::to_string(h.token_bytes) + " bytes (" +
         std::to_string(expected) + " bytes); the file is truncated or corrupt");
  return h;
}

Shard::Shard(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error("cannot open shard '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error("cannot stat shard '" + path + "'");
  }
  size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes < kShardHeaderBytes) {  // also keeps mmap from seeing a length of 0
    ::close(fd);
    throw Error(truncated(path, bytes));
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw Error("cannot map shard '" + path + "': " + std::strerror(errno));
  try {
    const ShardHeader h = parse_shard_header({static_cast<const std::byte*>(map), bytes}, path);
    num_tokens_ = h.num_tokens;
    token_bytes_ = h.token_bytes;
  } catch (...) {
    ::munmap(map, bytes);
    throw;
  }
  map_ = map;
  map_bytes_ = bytes;
  tokens_ = static_cast<const char*>(map_) + kShardHeaderBytes;
}

Shard::Shard(Shard&& o) noexcept
    : path_(std::move(o.path_)),
      map_(o.map_),
      map_bytes_(o.map_bytes_),
      tokens_(o.tokens_),
      num_tokens_(o.num_tokens_),
      token_bytes_(o.token_bytes_) {
  o.map_ = nullptr;
  o.map_bytes_ = 0;
}

Shard::~Shard() {
  if (map_) ::munmap(map_, map_bytes_);
}

namespace {

void write_shard_bytes(const std::string& path, int32_t magic, int32_t version, size_t count,
                       std::span<const std::byte> tokens) {
  MPT_CHECK(count <= static_cast<size_t>(INT32_MAX),
            "shard '" + path + "': too many tokens for one shard (" + std::to_string(count) + ")");
  std::string buf(kShardHeaderBytes + tokens.size(), '\0');
  int32_t header[kShardHeaderInts] = {};
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<int32_t>(count);
  std::memcpy(buf.data(), header, sizeof(header));
  if (!tokens.empty()) std::memcpy(buf.data() + kShardHeaderBytes, tokens.data(), tokens.size());
  write_file_atomic(path, buf.data(), buf.size());
}

}  // namespace

void write_shard(const std::string& path, std::span<const uint16_t> tokens) {
  write_shard_bytes(path, kShardMagic, kShardVersion, tokens.size(), std::as_bytes(tokens));
}

void write_shard(const std::string& path, std::span<const uint32_t> tokens) {
  write_shard_bytes(path, kWideShardMagic, kWideShardVersion, tokens.size(), std::as_bytes(tokens));
}

ShardWriter::ShardWriter(std::string path, bool wide) : path_(std::move(path)), wide_(wide) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot create shard '" + path_ + "': " + std::strerror(errno));
  buf_.reserve(1 << 20);
  buf_.resize(kShardHeaderBytes);  // zeros until finish() writes the count
}

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void ShardWriter::flush_buffer() {
  size_t done = 0;
  while (done < buf_.size()) {
    const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot write shard '" + path_ + "': " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  buf_.clear();
}

namespace {
template <class T>
void narrow_into(T* dst, const int* src, size_t n) {
  for (size_t k = 0; k < n; ++k) dst[k] = static_cast<T>(src[k]);
}
}  // namespace

void ShardWriter::append(std::span<const int> ids) {
  const size_t width = wide_ ? 4 : 2;
  MPT_CHECK(count_ + ids.size() <= static_cast<size_t>(INT32_MAX),
            "shard '" + path_ + "': too many tokens for one shard");
  for (size_t i = 0; i < ids.size();) {
    if (buf_.size() + width > buf_.capacity()) flush_buffer();
    const size_t take = std::min(ids.size() - i, (buf_.capacity() - buf_.size()) / width);
    const size_t at = buf_.size();
    buf_.resize(at + take * width);
    // The buffer's storage takes the ids as objects of the shard's width (C++20's implicit object
    // creation in a std::byte array; `at` is a multiple of the width), so the narrowing loop
    // vectorises.
    if (wide_)
      narrow_into(reinterpret_cast<uint32_t*>(buf_.data() + at), ids.data() + i, take);
    else
      narrow_into(reinterpret_cast<uint16_t*>(buf_.data() + at), ids.data() + i, take);
    i += take;
  }
  count_ += ids.size();
}

void ShardWriter::finish() {
  flush_buffer();
  int32_t header[kShardHeaderInts] = {};
  header[0] = wide_ ? kWideShardMagic : kShardMagic;
  header[1] = wide_ ? kWideShardVersion : kShardVersion;
  header[2] = static_cast<int32_t>(count_);
  if (::pwrite(fd_, header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header)) || ::fsync(fd_) != 0)
    throw Error("cannot write shard '" + path_ + "': " + std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw Error("cannot write shard '" + path_ + "': " + std::strerror(errno));
}

std::vector<std::string> glob_shards(const std::string& pattern) {
  glob_t g{};
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (out.empty()) throw Error("no token shards match '" + pattern + "'");
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace mptrain
