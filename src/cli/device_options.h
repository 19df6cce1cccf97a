// --device, --policy-of and --threads for the commands that run a model without training it (eval
// with HellaSwag, generate, fill-mask, predict), as `train` takes them: the one model on the backend
// the device names (backend/device.h's make_backend), under its precision's plan or, with
// --policy-of cuda, the GPU's plan run on the CPU (how CI runs the GPU's dtypes without a GPU).
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/make_backend.h"
#include "precision/policy.h"

namespace mptrain {

struct DeviceOptions {
  Device device = Device::Auto;
  PolicyOf policy_of = PolicyOf::Own;
  int threads = 0;  // 0: OpenMP's default
};

void add_device_options(CLI::App* cmd, DeviceOptions* o);

// The backend and the plan a command's model runs on (one clear Error for a device this build or
// machine lacks, or --policy-of cuda off the CPU; `command` names the subcommand in it).
struct ModelBackend {
  std::unique_ptr<Backend> backend;
  Policy policy;
};
ModelBackend model_backend(const DeviceOptions& o, Precision precision, std::string_view command);

}  // namespace mptrain
