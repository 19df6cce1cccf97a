// What accelerators this build and machine have. Implemented by src/backend/cuda
// when the CUDA backend is compiled, and by src/backend/nocuda otherwise, so that
// callers never need an #ifdef.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

namespace mptrain {

class Backend;

bool cuda_compiled();   // was the CUDA backend built into this binary?
int cuda_device_count(); // 0 when not compiled or no GPU/driver is present
std::string cuda_device_name(int index);

// What a CUDA backend may use. Both on is the product; the GPU ladder (`mptrain bench --device
// cuda --ladder`) turns them off to show each one's share of the step.
struct CudaOptions {
  bool fuse = true;   // GELU in the GEMM's epilogue, the residual add accumulated into the GEMM
  bool flash = true;  // flash attention where the shape allows it (else the naive path)
};
// The CUDA backend of the op interface on GPU `device` (Error when this build has none, or the
// machine has no such GPU).
std::unique_ptr<Backend> make_cuda_backend(int device = 0, CudaOptions options = {});
// Why --device cuda cannot run here ("this build has no CUDA backend (...)", "no CUDA device is
// visible"), or "" when it can: what check_device refuses and what auto's choice says.
std::string cuda_unavailable();
// The CUDA backend's answers to what an activation plan or a memory estimate asks (the
// attention's saved bytes, the fusions, the operand types), without a GPU: for `mptrain explain
// --device cuda` and the estimate a run is refused by. Its memory refuses every allocation.
// Error when this build has no CUDA backend.
std::unique_ptr<Backend> make_cuda_sizing_backend();
// Free and total memory of GPU `device` in bytes ({0, 0} when there is no such GPU).
struct DeviceMemoryInfo {
  size_t free = 0, total = 0;
};
DeviceMemoryInfo cuda_memory_info(int device);
// GPU `device`'s memory bandwidth in GB/s, measured now: the best of a few device-to-device copies
// of 1 GiB, counting the bytes read and written (STREAM's copy, as the CPU's figure). 0 when there
// is no such GPU or the copy fails.
double cuda_copy_bandwidth_gbs(int device);

}  // namespace mptrain
