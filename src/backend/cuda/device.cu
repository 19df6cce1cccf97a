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

double cuda_copy_bandwidth_gbs(int device) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return 0.0;
  }
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  double best_s = 0.0;
  bool ok = cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess &&
            cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess;
  for (int i = 0; ok && i < 4; ++i) {  // the first copy warms the clocks; the best of the rest
    float ms = 0.0f;
    ok = cudaEventRecord(start) == cudaSuccess && cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess &&
         cudaEventRecord(stop) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess &&
         cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
    if (ok && i > 0 && (best_s == 0.0 || ms / 1e3 < best_s)) best_s = ms / 1e3;
  }
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  cudaGetLastError();  // a failed step: 0, and no sticky status for the caller
  cudaSetDevice(previous);
  return ok && best_s > 0.0 ? 2.0 * static_cast<double>(bytes) / best_s / 1e9 : 0.0;
}

}  // namespace mptrain
