// train/device_step.h on the GPU: cuda::Gpt2Device driven with train_step's order (zero,
// accumulate micro-batches with loss_scale/accum, fp16 unscale/skip, numeric guard, clip,
// AdamW), the trainer's LossScaler in place of the device's own.
#include <string>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/gpt2_device.h"
#include "backend/device.h"
#include "core/error.h"
#include "train/device_step.h"

namespace mptrain {

namespace {

class Gpt2CudaStepper final : public DeviceStepper {
 public:
  Gpt2CudaStepper(const Gpt2Config& config, Precision precision, int B, int T, const AdamWHyper& hyper,
                  LossScaler* scaler)
      : ctx_(0), device_(config, precision, B, T, ctx_), hyper_(hyper), scaler_(scaler), B_(B), T_(T) {
    MPT_CHECK(needs_loss_scaler(precision) == (scaler != nullptr),
              "[train] --device cuda: fp16 needs the run's loss scaler, other precisions none");
    if (scaler) device_.use_loss_scaler(scaler);
    inputs_.resize(static_cast<size_t>(B) * T);
    targets_.resize(static_cast<size_t>(B) * T);
  }

  void upload(const float* params, const float* m, const float* v) override {
    device_.upload_params(params);  // zeroes the moments: theirs follow
    device_.upload_moments(m, v);
  }

  StepStats step(const NextBatchFn& next_batch, int accum, float lr, float grad_clip, int64_t t) override {
    MPT_CHECK(accum > 0, "[train] gradient accumulation steps must be positive");
    StepStats stats;
    stats.loss_scale = scaler_ ? scaler_->scale() : 1.0f;
    double loss_sum = 0.0;
    for (int micro = 0; micro < accum; ++micro) {
      next_batch(inputs_.data(), targets_.data());
      // The first micro-batch writes the gradients (the CPU step's zero), the rest add.
      loss_sum += device_.forward_backward(inputs_.data(), targets_.data(), B_, T_,
                                           stats.loss_scale / static_cast<float>(accum), micro > 0);
    }
    stats.loss = static_cast<float>(loss_sum / accum);
    const cuda::Gpt2Device::GuardedStep g = device_.guarded_step(stats.loss, lr, hyper_, grad_clip, t);
    stats.grad_norm = g.grad_norm;
    stats.skipped = g.skipped;
    stats.non_finite = g.non_finite;
    return stats;
  }

  void download_params(float* params) override { device_.download_params(params); }
  void download_moments(float* m, float* v) override { device_.download_moments(m, v); }
  void download_grads(float* grads) override { device_.download_grads(grads); }

 private:
  cuda::Context ctx_;
  cuda::Gpt2Device device_;
  AdamWHyper hyper_;
  LossScaler* scaler_;
  int B_, T_;
  std::vector<int> inputs_, targets_;
};

}  // namespace

std::unique_ptr<DeviceStepper> make_gpt2_cuda_stepper(const Gpt2Config& config, Precision precision, int B, int T,
                                                      const AdamWHyper& hyper, LossScaler* scaler) {
  const int devices = cuda_device_count();
  if (devices == 0)
    throw Error("[train] --device cuda: no CUDA device is visible (" + std::to_string(devices) + " devices)");
  return std::make_unique<Gpt2CudaStepper>(config, precision, B, T, hyper, scaler);
}

}  // namespace mptrain
