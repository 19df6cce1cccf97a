// --device / --policy-of / --threads for eval, generate, fill-mask and predict (cli/device_options.h).
#include "cli/device_options.h"

#include "cli/validators.h"
#include "core/error.h"

namespace mptrain {

void add_device_options(CLI::App* cmd, DeviceOptions* o) {
  cli::add_named_option(cmd, "--device", &o->device, parse_device, "{auto,cpu,cuda}",
                        "Where the model runs: cpu, cuda (GPU 0), or auto (cuda when this build has CUDA and a "
                        "GPU is visible)",
                        device_name(o->device));
  cli::add_named_option(cmd, "--policy-of", &o->policy_of, parse_policy_of, "{cpu,cuda}",
                        "Run another device's precision plan on this CPU: cuda (the GPU's 16-bit stream, logits "
                        "and small weights), to check that plan without a GPU");
  cmd->add_option("--threads", o->threads, "CPU threads (0 = all)")->capture_default_str()->check(cli::at_least(0));
}

ModelBackend model_backend(const DeviceOptions& o, Precision precision, std::string_view command) {
  const Device device = resolve_device(o.device, o.policy_of).device;
  check_device(device, o.policy_of, command);
  ModelBackend m{make_backend(device, o.threads), Policy{}};
  m.policy = plan_policy(precision, o.policy_of, *m.backend);
  return m;
}

}  // namespace mptrain
