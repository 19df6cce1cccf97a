// Device queries for a build with the CUDA backend. A missing driver or GPU is
// not an error here: it simply means zero devices (tests then skip themselves).
#include <cuda_runtime.h>

#include "backend/device.h"

namespace mptrain {

bool cuda_compiled() { return true; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" status
    return 0;
  }
  return n;
}

std::string cuda_device_name(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return "unknown";
  return prop.name;
}

DeviceMemoryInfo cuda_memory_info(int device) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  DeviceMemoryInfo info;
  if (cudaMemGetInfo(&info.free, &info.total) != cudaSuccess) {
    cudaGetLastError();
    info = {};
  }
  cudaSetDevice(previous);
  return info;
}

}  // namespace mptrain
