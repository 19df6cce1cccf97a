// `mptrain train --device cuda` in a build without the CUDA backend: one clear error.
#include "core/error.h"
#include "train/device_step.h"

namespace mptrain {

std::unique_ptr<DeviceStepper> make_gpt2_cuda_stepper(const Gpt2Config&, Precision, int, int, const Optimizer&,
                                                      LossScaler*, const DeviceParallel&) {
  throw Error("[train] this build has no CUDA backend (configure with -DMPTRAIN_CUDA=ON)");
}

}  // namespace mptrain
