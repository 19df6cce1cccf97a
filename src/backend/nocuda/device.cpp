// Device queries for a build without the CUDA backend: no GPU is ever reported.
#include "backend/device.h"

#include "backend/backend.h"
#include "core/error.h"

namespace mptrain {

bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_name(int) { return "none"; }
std::unique_ptr<Backend> make_cuda_backend(int, CudaOptions) {
  throw Error("this build has no CUDA backend (nvcc was not found when it was configured)");
}
std::unique_ptr<Backend> make_cuda_sizing_backend() { return make_cuda_backend(0, {}); }
DeviceMemoryInfo cuda_memory_info(int) { return {}; }
double cuda_copy_bandwidth_gbs(int) { return 0.0; }

}  // namespace mptrain
