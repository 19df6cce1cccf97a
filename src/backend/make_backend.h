// Where a command's model runs and whose plan it follows, typed once: --device (auto resolved in
// one place), --policy-of and --threads become a backend and its precision plan here, for every
// command (train, bench, eval, generate, fill-mask, predict, explain). No caller outside backend/
// and bench/ names a concrete backend or its context.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/device.h"
#include "core/named.h"
#include "precision/caps.h"
#include "precision/policy.h"
#include "precision/precision.h"

namespace mptrain {

// Where a command's model runs (--device): typed where the command line is read, auto resolved
// once (resolve_device), then only Cpu or Cuda.
enum class Device { Auto, Cpu, Cuda };
inline constexpr NameTable<Device, 3> kDeviceNames{
    {{Device::Auto, "auto"}, {Device::Cpu, "cpu"}, {Device::Cuda, "cuda"}}};
inline Device parse_device(std::string_view name) { return parse_in(kDeviceNames, name, "--device"); }
inline const char* device_name(Device d) { return name_in(kDeviceNames, d); }
// A --device that names a place, cpu or cuda: where a command reports on rather than runs (bench's
// timing, explain's plan); auto is refused with `why`.
inline Device parse_named_device(std::string_view name, std::string_view why) {
  const Device d = parse_device(name);
  MPT_CHECK(d != Device::Auto, "--device is cpu or cuda here: " + std::string(why));
  return d;
}

// --device auto resolved, the one place it is: cuda where this build has CUDA, a GPU is visible
// and the run takes its own plan (not --policy-of cuda, the GPU's plan on the CPU), else cpu;
// `note` is the line that says which and why ("" for a device named on the command line).
struct ResolvedDevice {
  Device device = Device::Cpu;
  std::string note;
};
ResolvedDevice resolve_device(Device requested, PolicyOf policy_of = PolicyOf::Own);
// The one check of a resolved device with its plan: --device cuda where this build or machine has
// none, and --policy-of cuda off the CPU (it runs the GPU's plan on the CPU backend), each one
// Error naming `command` ("[train] --device cuda: no CUDA device is visible").
void check_device(Device resolved, PolicyOf policy_of, std::string_view command);
// The backend every command's model runs on (train, bench, eval, generate, fill-mask, predict):
// the CPU's, on `threads` OpenMP threads (0: OpenMP's default; set for the whole process, which
// also loads the data), or GPU `gpu`'s with `options`. `device` is resolved (Cpu or Cuda).
std::unique_ptr<Backend> make_backend(Device device, int threads = 0, int gpu = 0, CudaOptions options = {});
// The precision plan a command runs on `be`: make_policy for the backend's capabilities, or for
// the GPU's under --policy-of cuda (precision/caps.h's plan_caps). Written here once for train,
// eval, generate, fill-mask, predict, bench and explain.
Policy plan_policy(Precision precision, PolicyOf policy_of, const Backend& be,
                   const std::vector<OpOverride>& overrides = {});

}  // namespace mptrain
