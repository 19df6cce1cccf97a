// Device queries for a build without the CUDA backend: no GPU is ever reported.
#include "backend/device.h"

namespace mptrain {

bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_name(int) { return "none"; }

}  // namespace mptrain
