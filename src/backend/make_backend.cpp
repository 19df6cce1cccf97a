// make_backend (backend/device.h): the one place a --device name becomes a backend.
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/device.h"
#include "core/error.h"

namespace mptrain {

std::string cuda_unavailable() {
  if (!cuda_compiled()) return "this build has no CUDA backend (configure with -DMPTRAIN_CUDA=ON)";
  return cuda_device_count() > 0 ? "" : "no CUDA device is visible";
}

std::string resolve_device(const std::string& device) {
  if (device != "auto") return device;
  return cuda_unavailable().empty() ? "cuda" : "cpu";
}

std::unique_ptr<Backend> make_backend(const std::string& device, cpu::Context& ctx, int gpu,
                                      CudaOptions options) {
  const std::string d = resolve_device(device);
  if (d == "cpu") return std::make_unique<cpu::CpuBackend>(ctx);
  MPT_CHECK(d == "cuda", "--device must be cpu, cuda or auto, not '" + device + "'");
  const std::string why = cuda_unavailable();
  MPT_CHECK(why.empty(), "--device cuda: " + why);
  return make_cuda_backend(gpu, options);
}

}  // namespace mptrain
