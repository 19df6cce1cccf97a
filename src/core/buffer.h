// An owning, 64-byte-aligned float buffer: one allocation per role (parameters,
// gradients, moments, activations), carved by tables into named views.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "core/error.h"

namespace mptrain {

class FloatBuffer {
 public:
  FloatBuffer() = default;
  explicit FloatBuffer(size_t n) { resize(n); }

  // Reallocates to n floats, zero-filled. Throws Error (not bad_alloc) when memory runs out.
  void resize(size_t n) {
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    void* p = bytes ? std::aligned_alloc(64, bytes) : nullptr;
    if (bytes && !p)
      throw Error("out of memory allocating " + std::to_string(bytes >> 20) + " MiB");
    if (p) std::memset(p, 0, bytes);
    data_.reset(static_cast<float*>(p));
    size_ = n;
  }
  void zero() {
    if (size_) std::memset(data_.get(), 0, size_ * sizeof(float));
  }
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }
  float& operator[](size_t i) { return data_.get()[i]; }
  const float& operator[](size_t i) const { return data_.get()[i]; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t size_ = 0;
};

}  // namespace mptrain
