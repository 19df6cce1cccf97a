// Owning device memory (RAII, move-only) and host<->device copies on a Context's stream.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// Copies are stream-ordered and then waited for, so the host buffer may be reused at once.
void copy_to_device(void* dst, const void* src, size_t bytes, Context& ctx);
void copy_to_host(void* dst, const void* src, size_t bytes, Context& ctx);
void copy_device(void* dst, const void* src, size_t bytes, Context& ctx);  // asynchronous
// Sets every byte (asynchronous). 0xFF makes every fp32, bf16 and fp16 element a NaN: tests
// poison outputs with it so that an element a kernel failed to write cannot pass.
void fill_bytes(void* dst, int byte, size_t bytes, Context& ctx);

class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(size_t bytes);  // throws LibraryError naming the size when out of memory
  ~DeviceMemory();
  DeviceMemory(DeviceMemory&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr, o.bytes_ = 0; }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace mptrain::cuda
