// Status checks for the CUDA runtime and cuBLASLt. Both go through core/error.h's
// throw_library_error, the one generator of library-failure messages ("[CUDA] call failed:
// text (file:line)"), so a failing GPU call reads like a failing oneDNN or MPI call.
// The header names no CUDA type: status codes travel as int, so host files that only launch
// kernels need no CUDA headers.
#pragma once

namespace mptrain::cuda {

void check_cuda_status(int status, const char* call, const char* file, int line);
void check_cublas_status(int status, const char* call, const char* file, int line);
// The launch just made (cudaGetLastError): a bad configuration or a missing kernel image.
void check_last_launch(const char* kernel, const char* file, int line);

}  // namespace mptrain::cuda

#define MPT_CUDA_CHECK(call) \
  ::mptrain::cuda::check_cuda_status(static_cast<int>(call), #call, __FILE__, __LINE__)
#define MPT_CUBLAS_CHECK(call) \
  ::mptrain::cuda::check_cublas_status(static_cast<int>(call), #call, __FILE__, __LINE__)
#define MPT_CUDA_CHECK_LAUNCH(kernel) ::mptrain::cuda::check_last_launch(kernel, __FILE__, __LINE__)
