// Owning, 64-byte-aligned buffers: one allocation per role (parameters, gradients, moments,
// activations, staged token ids), carved by tables into named views.
//
// A buffer's bytes live where its MemoryResource puts them: the host by default, or a backend's
// memory (Backend::memory(): a GPU's, for a model and optimizer that run there). Host code reads
// and writes a buffer through data()/operator[] only when the resource is host-visible; anything
// else crosses through upload()/download(), the explicit staging and download points.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "core/error.h"

namespace mptrain {

class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  // Zero-filled, 64-byte-aligned bytes (null for 0). Throws Error (not bad_alloc) when memory
  // runs out, naming how much was asked.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p, size_t bytes) noexcept = 0;
  virtual void zero(void* p, size_t bytes) = 0;
  // The bytes become zero, and memory wholly inside them may go back to the system until it is
  // written again (ZeRO-2's gradients: a rank keeps its shard, not the whole buffer). The
  // host's returns its whole pages (below); any other memory is only zeroed.
  virtual void discard(void* p, size_t bytes) { zero(p, bytes); }
  // host → this memory, and this memory → host (which waits for the work writing src).
  virtual void upload(void* dst, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* src, size_t bytes) = 0;
  // Whether host code may dereference this memory directly (the CPU backend's: it is the host's).
  virtual bool host_visible() const = 0;
};

// The process's host memory (aligned_alloc + memset/memcpy).
MemoryResource& host_memory();

template <class T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n, MemoryResource& where = host_memory()) : mem_(&where) { resize(n); }
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer(std::move(o)).swap(*this);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { free(); }

  // Reallocates to n elements, zero-filled, in the memory it was made for.
  void resize(size_t n) {
    free();
    const size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    data_ = static_cast<T*>(mem_->allocate(bytes));
    size_ = n;
    bytes_ = bytes;
  }
  // Reallocates to n elements in `where` (a backend's memory).
  void resize(size_t n, MemoryResource& where) {
    free();
    mem_ = &where;
    resize(n);
  }
  void zero() {
    if (size_) mem_->zero(data_, size_ * sizeof(T));
  }
  // [at, at + n) becomes zero, its memory returned where the memory can (MemoryResource::discard).
  void discard(size_t at, size_t n) {
    check_range(n, at);
    if (n) mem_->discard(data_ + at, n * sizeof(T));
  }
  // n elements from the host into [at, at + n), and back.
  void upload(const T* host, size_t n, size_t at = 0) {
    check_range(n, at);
    mem_->upload(data_ + at, host, n * sizeof(T));
  }
  void download(T* host, size_t n, size_t at = 0) const {
    check_range(n, at);
    mem_->download(host, data_ + at, n * sizeof(T));
  }
  MemoryResource& memory() const { return *mem_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  void free() noexcept {
    if (data_) mem_->release(data_, bytes_);
    data_ = nullptr;
    size_ = bytes_ = 0;
  }
  void check_range(size_t n, size_t at) const {
    MPT_CHECK(at <= size_ && n <= size_ - at, "a copy of " + std::to_string(n) + " values at " +
                                                  std::to_string(at) + " overruns a buffer of " +
                                                  std::to_string(size_));
  }
  void swap(Buffer& o) noexcept {
    std::swap(mem_, o.mem_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(bytes_, o.bytes_);
  }
  MemoryResource* mem_ = &host_memory();
  T* data_ = nullptr;
  size_t size_ = 0, bytes_ = 0;
};

// Host access to a buffer wherever it lives: its own memory when the host can touch it (no copy),
// else a host copy, downloaded on construction when `fetch`, written back by commit(). What
// reads or writes a whole buffer on the host (checkpoints, MPI collectives, error messages) goes
// through it, so the same code serves the CPU's memory and a GPU's.
template <class T>
class HostMirror {
 public:
  explicit HostMirror(Buffer<T>& b, bool fetch = true) : target_(&b) { attach(b, fetch); }
  explicit HostMirror(const Buffer<T>& b) { attach(b, true); }  // read only: no commit
  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  size_t size() const { return n_; }
  // Writes the host copy back (nothing when the buffer is host memory: it was written in place).
  void commit() {
    MPT_CHECK(target_ != nullptr, "a read-only host mirror cannot be written back");
    if (copy_.size()) target_->upload(copy_.data(), copy_.size());
  }

 private:
  void attach(const Buffer<T>& b, bool fetch) {
    n_ = b.size();
    if (b.memory().host_visible()) {
      ptr_ = const_cast<T*>(b.data());
      return;
    }
    copy_.resize(n_);
    if (fetch) b.download(copy_.data(), n_);
    ptr_ = copy_.data();
  }
  Buffer<T>* target_ = nullptr;
  Buffer<T> copy_;
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

using FloatBuffer = Buffer<float>;
using IndexBuffer = Buffer<int>;  // token ids, targets, rows: staged for the backend's kernels

}  // namespace mptrain
