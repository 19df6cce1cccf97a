// cuda::Context: device properties, a non-blocking stream, the cuBLASLt handle and workspace,
// the matmul plan cache and a grow-only scratch area.
#include "backend/cuda/context.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/context_impl.h"
#include "backend/device.h"
#include "core/error.h"

namespace mptrain::cuda {

Context::Context(int device, size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  const int count = cuda_device_count();
  MPT_CHECK(device >= 0 && device < count, "[cuda] no GPU " + std::to_string(device) + " on this machine (" +
                                               std::to_string(count) + " CUDA device(s) visible)");
  MPT_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  MPT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  info_.index = device;
  info_.name = prop.name;
  info_.major = prop.major;
  info_.minor = prop.minor;
  info_.sm_count = prop.multiProcessorCount;
  info_.global_mem = prop.totalGlobalMem;
  info_.smem_per_block = prop.sharedMemPerBlock;
  info_.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  Impl& im = *impl_;
  im.device = device;
  // Members are released by the destructor even if a later step throws: the unique_ptr<Impl>
  // is complete, and ~Context runs only for constructed objects, so release here by hand.
  try {
    MPT_CUDA_CHECK(cudaStreamCreateWithFlags(&im.stream, cudaStreamNonBlocking));
    MPT_CUBLAS_CHECK(cublasLtCreate(&im.lt));
    im.workspace_bytes = workspace_bytes;
    if (workspace_bytes) MPT_CUDA_CHECK(cudaMalloc(&im.workspace, workspace_bytes));
    MPT_CUDA_CHECK(cudaMalloc(&im.faults, sizeof(int)));
    MPT_CUDA_CHECK(cudaMemset(im.faults, 0, sizeof(int)));
  } catch (...) {
    if (im.faults) cudaFree(im.faults);
    if (im.workspace) cudaFree(im.workspace);
    if (im.lt) cublasLtDestroy(im.lt);
    if (im.stream) cudaStreamDestroy(im.stream);
    throw;
  }
}

Context::~Context() {
  Impl& im = *impl_;
  // Errors are not thrown from a destructor: a sticky fault was already reported by the call
  // that met it, and freeing is best effort.
  if (im.stream) cudaStreamSynchronize(im.stream);
  im.plans.clear();
  if (im.scratch) cudaFree(im.scratch);
  if (im.faults) cudaFree(im.faults);
  if (im.workspace) cudaFree(im.workspace);
  if (im.lt) cublasLtDestroy(im.lt);
  if (im.stream) cudaStreamDestroy(im.stream);
}

CUstream_st* Context::stream() const { return impl_->stream; }

void Context::synchronize() const { MPT_CUDA_CHECK(cudaStreamSynchronize(impl_->stream)); }

int* Context::faults() const { return impl_->faults; }

bool Context::smem_opt_in_needed(const void* kernel, size_t bytes) {
  size_t& opted = impl_->smem_optin[kernel];
  if (bytes <= opted) return false;
  opted = bytes;
  return true;
}

void Context::check_faults() {
  Impl& im = *impl_;
  int found = 0;
  MPT_CUDA_CHECK(cudaMemcpyAsync(&found, im.faults, sizeof found, cudaMemcpyDeviceToHost, im.stream));
  MPT_CUDA_CHECK(cudaStreamSynchronize(im.stream));
  if (found == 0) return;
  MPT_CUDA_CHECK(cudaMemsetAsync(im.faults, 0, sizeof(int), im.stream));
  std::string what;
  if (found & kFaultRowIndex)
    what += "a row index (gather_rows / scatter_add_rows) outside the tensor's rows (those rows were not moved)";
  if (found & kFaultPacking)
    what += std::string(what.empty() ? "" : "; ") +
            "packed sequences whose cu_seqlens do not start at 0, hold a sequence outside [1, T] rows, or end "
            "elsewhere than the tensors' last row (the batch's results are not to be trusted)";
  throw Error("[backend cuda] a kernel found bad input in device memory: " + what);
}

void* Context::scratch(size_t bytes) {
  Impl& im = *impl_;
  if (bytes <= im.scratch_bytes) return im.scratch;
  // The old area may still be read by queued work: wait before freeing it.
  MPT_CUDA_CHECK(cudaStreamSynchronize(im.stream));
  if (im.scratch) MPT_CUDA_CHECK(cudaFree(im.scratch));
  im.scratch = nullptr;
  im.scratch_bytes = 0;
  MPT_CUDA_CHECK(cudaMalloc(&im.scratch, bytes));
  im.scratch_bytes = bytes;
  return im.scratch;
}

}  // namespace mptrain::cuda
