// A typed, owning device array with host copies: the GPU tests' and op benchmarks' buffers.
#pragma once
#include <cstddef>
#include <vector>

#include "backend/cuda/device_buffer.h"

namespace mptrain::cuda {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : mem_(n * sizeof(T)), n_(n) {}
  DeviceBuffer(const std::vector<T>& host, Context& ctx) : DeviceBuffer(host.size()) { upload(host, ctx); }
  T* data() const { return static_cast<T*>(mem_.get()); }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host, Context& ctx) {
    copy_to_device(data(), host.data(), host.size() * sizeof(T), ctx);
  }
  std::vector<T> download(Context& ctx) const {
    std::vector<T> host(n_);
    copy_to_host(host.data(), data(), n_ * sizeof(T), ctx);
    return host;
  }
  void poison(Context& ctx) { fill_bytes(data(), 0xFF, n_ * sizeof(T), ctx); }
  void zero(Context& ctx) { fill_bytes(data(), 0, n_ * sizeof(T), ctx); }

 private:
  DeviceMemory mem_;
  size_t n_ = 0;
};

}  // namespace mptrain::cuda
