// What accelerators this build and machine have. Implemented by src/backend/cuda
// when the CUDA backend is compiled, and by src/backend/nocuda otherwise, so that
// callers never need an #ifdef.
#pragma once
#include <memory>
#include <string>

namespace mptrain {

class Backend;

bool cuda_compiled();   // was the CUDA backend built into this binary?
int cuda_device_count(); // 0 when not compiled or no GPU/driver is present
std::string cuda_device_name(int index);
// The CUDA backend of the op interface on GPU `device` (Error when this build has none, or the
// machine has no such GPU).
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

}  // namespace mptrain
