// The CUDA / cuBLASLt status checks of check.h.
#include "backend/cuda/check.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace mptrain::cuda {

void check_cuda_status(int status, const char* call, const char* file, int line) {
  const auto e = static_cast<cudaError_t>(status);
  if (e != cudaSuccess) throw_library_error("CUDA", call, cudaGetErrorString(e), file, line);
}

void check_cublas_status(int status, const char* call, const char* file, int line) {
  const auto s = static_cast<cublasStatus_t>(status);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw_library_error("cuBLASLt", call,
                        std::string(cublasLtGetStatusName(s)) + ": " + cublasLtGetStatusString(s), file,
                        line);
}

void check_last_launch(const char* kernel, const char* file, int line) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_library_error("CUDA", kernel, cudaGetErrorString(e), file, line);
}

}  // namespace mptrain::cuda
