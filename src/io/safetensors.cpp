// safetensors reading and writing. The reader maps the file and checks the header completely
// (types, dtypes, overflow-checked sizes, ranges, overlaps) before exposing any data, so a
// corrupt or hostile file fails with one clear message instead of reading out of bounds.
// The writer streams header and tensors straight from the callers' buffers to a temporary
// file, so a 500 MB checkpoint is never assembled in memory.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/fileutil.h"

namespace mptrain {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this code copies it without byte swaps");

namespace {

using json = nlohmann::json;

constexpr const char* kMetadataKey = "__metadata__";
constexpr size_t kHeaderAlign = 8;

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "F32", 4}, {DType::BF16, "BF16", 2}, {DType::F16, "F16", 2}, {DType::I32, "I32", 4},
    {DType::I64, "I64", 8}, {DType::U16, "U16", 2},   {DType::U8, "U8", 1},   {DType::F64, "F64", 8},
};

const DTypeInfo& info(DType dtype) {
  for (const DTypeInfo& d : kDTypes)
    if (d.dtype == dtype) return d;
  throw Error("[safetensors] invalid DType value " + std::to_string(static_cast<int>(dtype)));
}

// numel of a shape with every extent >= 0, or false on overflow of size_t.
bool checked_numel(std::span<const int64_t> shape, size_t* out) {
  size_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (__builtin_mul_overflow(n, static_cast<size_t>(d), &n)) return false;
  }
  *out = n;
  return true;
}

[[noreturn]] void fail_errno(const std::string& what, const std::string& path) {
  throw Error("cannot " + what + " '" + path + "': " + std::strerror(errno));
}

// Closes (and, unless released, unlinks) a temporary file when the writer unwinds.
class TempFile {
 public:
  TempFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!released_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write_all(const void* data, size_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      ssize_t n = ::write(fd_, p, bytes);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail_errno("write", path_);
      }
      p += n;
      bytes -= static_cast<size_t>(n);
    }
  }
  void sync_and_close() {
    if (::fsync(fd_) != 0) fail_errno("fsync", path_);
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail_errno("close", path_);
  }
  void release() { released_ = true; }

 private:
  std::string path_;
  int fd_;
  bool released_ = false;
};

}  // namespace

size_t dtype_size(DType dtype) { return info(dtype).size; }
const char* dtype_name(DType dtype) { return info(dtype).name; }

bool dtype_from_name(const std::string& name, DType* out) {
  for (const DTypeInfo& d : kDTypes) {
    if (name == d.name) {
      *out = d.dtype;
      return true;
    }
  }
  return false;
}

size_t TensorView::numel() const {
  size_t n = 0;
  checked_numel(shape, &n);  // validated when the view was made
  return n;
}

std::string shape_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// ------------------------------------------------------------------------------------------
// Writer

SafetensorsWriter::Entry& SafetensorsWriter::add_entry(const std::string& name, DType dtype,
                                                       std::vector<int64_t> shape, const void* data) {
  const std::string where = "[safetensors] tensor '" + name + "'";
  if (name.empty()) throw Error("[safetensors] tensor name must not be empty");
  if (name == kMetadataKey) throw Error(where + ": the name is reserved for metadata");
  for (const Entry& e : entries_)
    if (e.name == name) throw Error(where + " added twice");
  size_t numel = 0, nbytes = 0;
  if (!checked_numel(shape, &numel) || __builtin_mul_overflow(numel, dtype_size(dtype), &nbytes))
    throw Error(where + ": invalid shape " + shape_string(shape));
  if (nbytes > 0 && data == nullptr)
    throw Error(where + ": null data for " + std::to_string(nbytes) + " bytes");
  entries_.push_back(Entry{name, dtype, std::move(shape), static_cast<const std::byte*>(data), nbytes, {}});
  return entries_.back();
}

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const void* data) {
  add_entry(name, dtype, std::move(shape), data);
}

void SafetensorsWriter::add_copy(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                 const void* data) {
  Entry& e = add_entry(name, dtype, std::move(shape), data);
  const std::byte* src = e.data;
  e.owned.assign(src, src + e.nbytes);
  e.data = nullptr;  // write() reads `owned`, which survives moves of the entries vector
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

void SafetensorsWriter::write(const std::string& path) const {
  // Larger elements first, then by name: every offset is a multiple of its element size.
  std::vector<const Entry*> order;
  order.reserve(entries_.size());
  for (const Entry& e : entries_) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    size_t sa = dtype_size(a->dtype), sb = dtype_size(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });

  json header = json::object();
  if (!metadata_.empty()) {
    json meta = json::object();
    for (const auto& [k, v] : metadata_) meta[k] = v;
    header[kMetadataKey] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const Entry* e : order) {
    header[e->name] = {
        {"dtype", dtype_name(e->dtype)}, {"shape", e->shape}, {"data_offsets", {offset, offset + e->nbytes}}};
    offset += e->nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& ex) {  // e.g. a name or metadata value that is not UTF-8
    throw Error("cannot write '" + path + "': header is not valid JSON text: " + ex.what());
  }
  text.append((kHeaderAlign - text.size() % kHeaderAlign) % kHeaderAlign, ' ');
  uint64_t n = text.size();

  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_errno("create", tmp);
  TempFile file(tmp, fd);
  file.write_all(&n, sizeof(n));
  file.write_all(text.data(), text.size());
  for (const Entry* e : order) file.write_all(e->owned.empty() ? e->data : e->owned.data(), e->nbytes);
  file.sync_and_close();
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail_errno("rename into", path);
  file.release();
  fsync_dir(std::filesystem::path(path).parent_path().string());
}

// ------------------------------------------------------------------------------------------
// Reader

namespace {

// Reads a JSON integer that must fit in [0, max].
bool as_count(const json& j, uint64_t max, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
  } else if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    *out = static_cast<uint64_t>(v);
  } else {
    return false;
  }
  return *out <= max;
}

}  // namespace

namespace {

std::string too_short(const std::string& file, uint64_t size) {
  return file + ": not a safetensors file: " + std::to_string(size) +
         " bytes is shorter than the 8-byte header length";
}

}  // namespace

SafetensorsContents parse_safetensors(std::span<const std::byte> bytes, const std::string& file) {
  const uint64_t size = bytes.size();
  if (size < 8) throw Error(too_short(file, size));
  SafetensorsContents out;
  const char* base = reinterpret_cast<const char*>(bytes.data());
  uint64_t n = 0;
  std::memcpy(&n, base, sizeof(n));
  if (n > size - 8)
    throw Error(file + ": header length " + std::to_string(n) + " exceeds the " + std::to_string(size - 8) +
                " bytes after the length field (truncated or not a safetensors file)");
  const uint64_t data_bytes = size - 8 - n;
  const std::byte* data = bytes.data() + 8 + n;

  // A parser callback spots duplicate top-level names, which plain parsing would merge.
  std::set<std::string> seen;
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !seen.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(base + 8, base + 8 + n, on_event);
  } catch (const json::exception& ex) {
    throw Error(file + ": header is not valid JSON: " + ex.what());
  }
  if (!header.is_object()) throw Error(file + ": header is not a JSON object");
  if (!duplicate.empty()) throw Error(file + ": name '" + duplicate + "' appears twice in the header");

  struct Range {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == kMetadataKey) {
      if (!v.is_object()) throw Error(file + ": \"__metadata__\" is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          throw Error(file + ": metadata '" + m.key() + "' is not a string (" + m.value().dump() + ")");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = file + ": tensor '" + name + "'";
    if (!v.is_object()) throw Error(where + ": entry is not an object");
    for (auto f = v.begin(); f != v.end(); ++f)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
        throw Error(where + ": unexpected field '" + f.key() + "'");
    auto dt = v.find("dtype"), sh = v.find("shape"), off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) throw Error(where + ": missing or non-string \"dtype\"");
    if (sh == v.end() || !sh->is_array()) throw Error(where + ": missing or non-array \"shape\"");
    if (off == v.end() || !off->is_array() || off->size() != 2)
      throw Error(where + ": missing \"data_offsets\" or not a [begin, end] pair");

    TensorView t;
    t.name = name;
    if (!dtype_from_name(dt->get<std::string>(), &t.dtype))
      throw Error(where + ": unknown dtype '" + dt->get<std::string>() + "'");
    for (const json& d : *sh) {
      uint64_t e = 0;
      if (!as_count(d, std::numeric_limits<int64_t>::max(), &e))
        throw Error(where + ": shape " + sh->dump() + " has an extent that is not a non-negative integer");
      t.shape.push_back(static_cast<int64_t>(e));
    }
    uint64_t begin = 0, end = 0;
    if (!as_count((*off)[0], UINT64_MAX, &begin) || !as_count((*off)[1], UINT64_MAX, &end))
      throw Error(where + ": data_offsets " + off->dump() + " are not non-negative integers");
    if (end < begin) throw Error(where + ": data_offsets " + off->dump() + " end before they begin");
    if (end > data_bytes)
      throw Error(where + ": data_offsets " + off->dump() + " run past the data section (" +
                  std::to_string(data_bytes) + " bytes; file truncated?)");
    size_t numel = 0, nbytes = 0;
    if (!checked_numel(t.shape, &numel) || __builtin_mul_overflow(numel, dtype_size(t.dtype), &nbytes))
      throw Error(where + ": shape " + shape_string(t.shape) + " overflows the addressable size");
    if (end - begin != nbytes)
      throw Error(where + ": holds " + std::to_string(end - begin) + " bytes but " + dtype_name(t.dtype) +
                  " " + shape_string(t.shape) + " needs " + std::to_string(nbytes));
    t.data = data + begin;
    t.nbytes = nbytes;
    auto [pos, inserted] = out.tensors.emplace(name, std::move(t));
    if (nbytes > 0) ranges.push_back(Range{begin, end, &pos->first});
  }

  // Gaps are tolerated (they only waste space); overlaps are not.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i - 1].end)
      throw Error(file + ": tensor '" + *ranges[i].name + "' overlaps tensor '" + *ranges[i - 1].name +
                  "' in the data section");
  }
  return out;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const std::string file = "'" + path + "'";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno("open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    fail_errno("stat", path);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {  // also keeps mmap from seeing a length of 0
    ::close(fd);
    throw Error(too_short(file, size));
  }
  map_ = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int saved = errno;
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    errno = saved;
    fail_errno("map", path);
  }
  map_bytes_ = size;

  // The destructor will not run if the constructor throws, so unmap by hand.
  try {
    SafetensorsContents contents = parse_safetensors({static_cast<const std::byte*>(map_), map_bytes_}, file);
    tensors_ = std::move(contents.tensors);
    metadata_ = std::move(contents.metadata);
  } catch (...) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      map_(other.map_),
      map_bytes_(other.map_bytes_),
      tensors_(std::move(other.tensors_)),
      metadata_(std::move(other.metadata_)) {
  other.map_ = nullptr;  // the views keep pointing into the same mapping, now owned here
  other.map_bytes_ = 0;
}

bool SafetensorsFile::contains(const std::string& name) const { return tensors_.count(name) > 0; }

const TensorView& SafetensorsFile::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("'" + path_ + "': no tensor '" + name + "'");
  return it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

void SafetensorsFile::read_f32(const std::string& name, std::span<const int64_t> expected_shape,
                               float* dst) const {
  const TensorView& t = get(name);
  const std::string where = "'" + path_ + "': tensor '" + name + "'";
  if (t.dtype != DType::F32)
    throw Error(where + " is " + dtype_name(t.dtype) + " " + shape_string(t.shape) + ", expected F32");
  if (!std::equal(t.shape.begin(), t.shape.end(), expected_shape.begin(), expected_shape.end()))
    throw Error(where + " has shape " + shape_string(t.shape) + ", expected " + shape_string(expected_shape));
  if (t.nbytes > 0) std::memcpy(dst, t.data, t.nbytes);
}

}  // namespace mptrain
