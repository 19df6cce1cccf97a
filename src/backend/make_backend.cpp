// make_backend (backend/device.h): the one place a --device name becomes a backend.
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/device.h"
#include "core/error.h"

namespace mptrain {

std::string resolve_device(const std::string& device) {
  if (device != "auto") return device;
  return cuda_compiled() && cuda_device_count() > 0 ? "cuda" : "cpu";
}

std::unique_ptr<Backend> make_backend(const std::string& device, cpu::Context& ctx, int gpu, CudaOptions options) {
  const std::string d = resolve_device(device);
  if (d == "cpu") return std::make_unique<cpu::CpuBackend>(ctx);
  MPT_CHECK(d == "cuda", "--device must be cpu, cuda or auto, not '" + device + "'");
  MPT_CHECK(cuda_compiled(), "--device cuda: this build has no CUDA backend (configure with -DMPTRAIN_CUDA=ON)");
  MPT_CHECK(cuda_device_count() > 0, "--device cuda: no CUDA device is visible on this machine");
  return make_cuda_backend(gpu, options);
}

}  // namespace mptrain
