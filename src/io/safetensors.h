// safetensors files (the Hugging Face format): a little-endian u64 N, N bytes of JSON header
// (name -> {dtype, shape, data_offsets [begin, end) relative to the data section}, plus an
// optional "__metadata__" object of string -> string), then the raw row-major little-endian data.
// SafetensorsWriter streams a file atomically (temporary name, fsync, rename); SafetensorsFile
// memory-maps one and validates the whole header before handing out any view of the data.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace mptrain {

// Element types, spelled in files as "F32", "BF16", "F16", "I32", "I64", "U16", "U8", "F64".
enum class DType { F32, BF16, F16, I32, I64, U16, U8, F64 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
// Parses a safetensors dtype name; returns false for a name this library does not know.
bool dtype_from_name(const std::string& name, DType* out);

// One tensor inside a mapped file. `data` points into the mapping (valid while the
// SafetensorsFile lives) and is aligned to the element size when the file was written by
// SafetensorsWriter; files from elsewhere may leave it unaligned, so copy with memcpy.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // [] for a scalar (numel 1); any zero extent gives numel 0
  const std::byte* data = nullptr;
  size_t nbytes = 0;
  size_t numel() const;
};

// Collects tensors, then writes them in one go. Tensors are laid out contiguously (no gaps,
// as other safetensors readers require) in order of decreasing element size, then by name,
// so every tensor starts at a multiple of its element size; the header is padded with
// spaces to a multiple of 8, so the data section is 8-byte aligned within the file.
// The same inputs always give the same bytes.
class SafetensorsWriter {
 public:
  // REFERENCES data (numel * dtype_size bytes): the caller keeps it alive and unchanged
  // until write() returns. Nothing is copied, so a 500 MB model is never held twice.
  // Throws Error on a duplicate or empty name, the reserved name "__metadata__", a
  // negative extent, or a null pointer for a non-empty tensor.
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data);
  // Like add(), but copies the bytes now (for small temporaries such as a step counter).
  void add_copy(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data);
  // Sets (or replaces) one "__metadata__" entry.
  void set_metadata(const std::string& key, const std::string& value);
  // Streams the file to "<path>.tmp.<pid>", fsyncs it, renames it over path and fsyncs the
  // directory: a crash at any instant leaves either the old file or the complete new one.
  void write(const std::string& path) const;

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const std::byte* data;  // points into `owned` when owned is non-empty
    size_t nbytes;
    std::vector<std::byte> owned;
  };
  Entry& add_entry(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data);

  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// The tensors and metadata of a whole safetensors file held in memory, validated as
// SafetensorsFile describes below; the views point into `bytes`. `file` names the source in
// errors ("'<path>'"). SafetensorsFile maps a file and calls this; the fuzz target
// (fuzz/safetensors_fuzz.cpp) calls it on raw bytes.
struct SafetensorsContents {
  std::map<std::string, TensorView> tensors;
  std::map<std::string, std::string> metadata;
};
SafetensorsContents parse_safetensors(std::span<const std::byte> bytes, const std::string& file);

// A read-only, memory-mapped safetensors file. The constructor validates everything
// (header length, JSON, every entry's dtype/shape/offsets, sizes against shapes, no
// overlaps, metadata types) before any tensor is exposed; each violation throws one Error
// naming the file and the tensor.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(SafetensorsFile&&) = delete;

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const;
  // Throws Error "'<path>': no tensor '<name>'".
  const TensorView& get(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Copies an F32 tensor into dst (numel floats) after checking the dtype and the exact
  // shape; a mismatch throws Error naming the tensor, the file and both shapes.
  void read_f32(const std::string& name, std::span<const int64_t> expected_shape, float* dst) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// "[2, 3]"; "[]" for a scalar. For error messages.
std::string shape_string(std::span<const int64_t> shape);

}  // namespace mptrain
