// DeviceMemory and the copies of device_buffer.h.
#include "backend/cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <string>

#include "backend/cuda/check.h"
#include "core/error.h"

namespace mptrain::cuda {

DeviceMemory::DeviceMemory(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t e = cudaMalloc(&ptr_, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // out of memory is not sticky; clear it
    throw_library_error("CUDA", ("cudaMalloc(" + std::to_string(bytes >> 20) + " MiB)").c_str(),
                        cudaGetErrorString(e), __FILE__, __LINE__);
  }
}

DeviceMemory::~DeviceMemory() {
  if (ptr_) cudaFree(ptr_);
}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void copy_to_device(void* dst, const void* src, size_t bytes, Context& ctx) {
  if (bytes == 0) return;
  MPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx.stream()));
  ctx.synchronize();
}

void copy_to_host(void* dst, const void* src, size_t bytes, Context& ctx) {
  if (bytes == 0) return;
  MPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream()));
  ctx.synchronize();
}

void copy_device(void* dst, const void* src, size_t bytes, Context& ctx) {
  if (bytes == 0) return;
  MPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream()));
}

void fill_bytes(void* dst, int byte, size_t bytes, Context& ctx) {
  if (bytes == 0) return;
  MPT_CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, ctx.stream()));
}

}  // namespace mptrain::cuda
