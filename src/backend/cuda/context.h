// The CUDA backend's context: one device, one stream, the cuBLASLt handle and its workspace,
// the cache of matmul plans, and a scratch area for epilogue side outputs. Every launcher
// takes a Context; nothing in the backend is global. RAII: the destructor releases all of it.
//
// CUDA types stay out of this header (cudaStream_t is CUstream_st*, declared here) so that
// host files which only call launchers compile without CUDA headers.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

struct CUstream_st;

namespace mptrain::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int sm_count = 0;
  size_t global_mem = 0;
  size_t smem_per_block = 0;        // default (non-opt-in) shared memory per block, bytes
  size_t smem_per_block_optin = 0;  // the most a kernel may opt in to (cudaFuncSetAttribute)
};

class Context {
 public:
  // Throws mptrain::Error when there is no such GPU (the message names the device count).
  explicit Context(int device = 0, size_t workspace_bytes = kDefaultWorkspace);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // 32 MiB: what NVIDIA recommends for cuBLASLt on Hopper (4 MiB suffices before it).
  static constexpr size_t kDefaultWorkspace = 32u << 20;

  const DeviceInfo& info() const { return info_; }
  CUstream_st* stream() const;
  // Waits for all work on the stream; a kernel fault surfaces here as LibraryError.
  void synchronize() const;

  // Device scratch of at least `bytes`, valid until the next call (stream-ordered users only).
  // Grows on first use of a larger size (never inside a steady-state step: shapes repeat).
  void* scratch(size_t bytes);

  // Bad input that kernels find in device memory, where the host cannot look before a launch
  // without a sync (index lists, packed-sequence offsets): a kernel ORs its Fault into faults()
  // and does no out-of-bounds access; check_faults(), at the backend's next wait for the device,
  // throws one Error naming what was found (and clears the flags).
  enum Fault : int { kFaultRowIndex = 1, kFaultPacking = 2 };
  int* faults() const;
  void check_faults();

  // Whether `kernel` must now opt in to `bytes` of dynamic shared memory on this device (more
  // than it has so far): true once per kernel and size, which it then records. The caller sets
  // the attribute, once, instead of on every launch.
  bool smem_opt_in_needed(const void* kernel, size_t bytes);

  struct Impl;  // cuBLASLt handle, workspace, plan cache (context_impl.h)
  Impl& impl() { return *impl_; }

 private:
  DeviceInfo info_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mptrain::cuda
