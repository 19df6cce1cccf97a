// Context internals shared by context.cpp and gemm.cpp (the only files that include cuBLASLt).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "backend/cuda/context.h"
#include "backend/cuda/gemm_plan.h"

namespace mptrain::cuda {

struct Context::Impl {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
  int* faults = nullptr;  // Context::Fault bits, device memory
  std::unordered_map<GemmKey, GemmPlan, GemmKeyHash> plans;
  // The dynamic shared memory each kernel (by address) has opted in to on this device.
  std::unordered_map<const void*, size_t> smem_optin;
};

}  // namespace mptrain::cuda
