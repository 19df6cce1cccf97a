// --device / --policy-of for eval, generate and fill-mask (cli/device_options.h).
#include "cli/device_options.h"

#include "backend/device.h"
#include "core/error.h"

namespace mptrain {

void add_device_options(CLI::App* cmd, DeviceOptions* o) {
  cmd->add_option("--device", o->device,
                  "Where the model runs: cpu, cuda (GPU 0), or auto (cuda when this build has CUDA and a GPU "
                  "is visible)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("--policy-of", o->policy_of,
                  "Run another device's precision plan on this CPU: cuda (the GPU's 16-bit stream, logits and "
                  "small weights), to check that plan without a GPU")
      ->check(CLI::IsMember({"cpu", "cuda"}));
}

ModelBackend model_backend(const DeviceOptions& o, cpu::Context& ctx, Precision precision) {
  const std::string device = resolve_device(o.device);
  MPT_CHECK(o.policy_of != "cuda" || device == "cpu",
            "--policy-of runs another device's plan on the CPU backend: it needs --device cpu");
  ModelBackend m{make_backend(device, ctx), Policy{}};
  m.policy = make_policy(precision, {}, o.policy_of == "cuda" ? kCudaCaps : m.backend->caps());
  return m;
}

}  // namespace mptrain
