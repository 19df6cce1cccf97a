// Byte offsets into one device allocation, each 256-byte aligned: the device models
// (Gpt2Device, BertDevice) plan every activation and scratch region with it, then allocate
// once. 256 bytes covers cuBLASLt's and the packed (16-byte) kernels' alignment needs.
#pragma once
#include <cstddef>

namespace mptrain::cuda {

class Arena {
 public:
  static constexpr size_t kAlign = 256;
  size_t add(size_t bytes) {
    const size_t at = size_;
    size_ += (bytes + kAlign - 1) / kAlign * kAlign;
    return at;
  }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

}  // namespace mptrain::cuda
