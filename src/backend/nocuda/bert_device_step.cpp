// train/bert_device_step.h in a build without the CUDA backend: one clear error.
#include "train/bert_device_step.h"

#include "core/error.h"

namespace mptrain {

std::unique_ptr<DeviceStepper> make_bert_cuda_stepper(const BertConfig&, Precision, int, int, int,
                                                      const Optimizer&, LossScaler*, const DeviceParallel&,
                                                      BertMicroBatches) {
  throw Error("[train] --device cuda: this build has no CUDA backend (configure with -DMPTRAIN_CUDA=ON)");
}

}  // namespace mptrain
