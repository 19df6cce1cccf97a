// Activations planned once per (B, T): a named table of buffers carved from one
// allocation. Entries are addressed by the handle add() returns, so the model's
// forward and backward name every buffer they touch.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/buffer.h"

namespace mptrain {

class ActivationPlan {
 public:
  using Handle = size_t;
  // Registers a buffer of n floats (rounded up to 16 so every buffer stays 64-byte aligned).
  Handle add(std::string name, size_t n);
  void allocate();  // one allocation for everything added so far
  float* get(Handle h) { return buffer_.data() + entries_[h].offset; }
  size_t total_floats() const { return total_; }
  struct Entry {
    std::string name;
    size_t offset;
    size_t numel;
  };
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
  size_t total_ = 0;
  FloatBuffer buffer_;
};

}  // namespace mptrain
