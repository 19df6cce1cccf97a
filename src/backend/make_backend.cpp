// make_backend (backend/device.h): the one place a --device becomes a backend and its plan.
#include <omp.h>

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/make_backend.h"
#include "core/error.h"

namespace mptrain {

std::string cuda_unavailable() {
  if (!cuda_compiled()) return "this build has no CUDA backend (configure with -DMPTRAIN_CUDA=ON)";
  return cuda_device_count() > 0 ? "" : "no CUDA device is visible";
}

ResolvedDevice resolve_device(Device requested, PolicyOf policy_of) {
  if (requested != Device::Auto) return {requested, ""};
  const std::string why =
      policy_of == PolicyOf::Cuda ? "--policy-of cuda runs the GPU's plan on the CPU" : cuda_unavailable();
  const Device d = why.empty() ? Device::Cuda : Device::Cpu;
  return {d, std::string("device auto: ") + device_name(d) + (why.empty() ? "" : " (" + why + ")")};
}

void check_device(Device resolved, PolicyOf policy_of, std::string_view command) {
  const std::string who = "[" + std::string(command) + "] ";
  MPT_CHECK(resolved != Device::Auto, who + "--device auto was not resolved");
  MPT_CHECK(resolved != Device::Cuda || policy_of != PolicyOf::Cuda,
            who + "--policy-of runs another device's plan on the CPU backend: it needs --device cpu");
  MPT_CHECK(resolved != Device::Cuda || cuda_unavailable().empty(), who + "--device cuda: " + cuda_unavailable());
}

std::unique_ptr<Backend> make_backend(Device device, int threads, int gpu, CudaOptions options) {
  MPT_CHECK(threads >= 0, "--threads must be at least 0, not " + std::to_string(threads));
  if (threads > 0) omp_set_num_threads(threads);
  if (device == Device::Cuda) return make_cuda_backend(gpu, options);
  MPT_CHECK(device == Device::Cpu, "[backend] make_backend needs a resolved device (cpu or cuda)");
  return std::make_unique<cpu::CpuBackend>();
}

Policy plan_policy(Precision precision, PolicyOf policy_of, const Backend& be,
                   const std::vector<OpOverride>& overrides) {
  return make_policy(precision, overrides, plan_caps(policy_of, be.caps()));
}

}  // namespace mptrain
