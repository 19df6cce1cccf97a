// train/device_step.h on the GPU: cuda::Gpt2Device driven with train_step's order (zero,
// accumulate micro-batches with loss_scale/accum, then cuda::DeviceOptimizer: fp16
// unscale/skip, numeric guard, clip, AdamW or Sophia, and Sophia's curvature pass on the last
// micro-batch), the trainer's LossScaler in place of the device's own.
//
// Data parallelism (train/device_step.h's DeviceParallel) through cuda::DeviceDataParallel
// (device_data_parallel.h, shared with the BERT stepper): after the micro-batches, the loss is
// summed and the fp32 gradients averaged over ranks (ZeRO off: all-reduce; ZeRO-1: reduced onto
// the CPU's partition, this rank's DeviceOptimizer over its range, the norm/overflow/win-rate
// reduced over ranks), then after a ZeRO-1 update the all-gather of the parameters.
// Overlap: during the last micro-batch (and the curvature pass) Gpt2Device's gradient-ready
// hook hands each range (ln_f, layer L-1 ... 0, embeddings) to NCCL's stream as soon as the
// backward has enqueued it (nccl_async.h), so the reduction of a layer's gradients runs while
// the backward of the layers before it computes; the optimizer waits for all of them.
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/device_data_parallel.h"
#include "backend/cuda/device_optimizer.h"
#include "backend/cuda/device_step_common.h"
#include "backend/cuda/gpt2_device.h"
#include "backend/device.h"
#include "core/error.h"
#include "train/device_step.h"

namespace mptrain {

namespace {

class Gpt2CudaStepper final : public DeviceStepper {
 public:
  Gpt2CudaStepper(const Gpt2Config& config, Precision precision, int B, int T, const Optimizer& optimizer,
                  LossScaler* scaler, const DeviceParallel& par)
      : ctx_(cuda::DeviceDataParallel::device_of(par)),
        device_(config, precision, B, T, ctx_),
        optimizer_(device_.table(), cuda::device_optimizer_config(optimizer), ctx_,
                   cuda::DeviceDataParallel::owned_segments(par)),
        dp_(par),
        scaler_(scaler),
        B_(B),
        T_(T) {
    MPT_CHECK(needs_loss_scaler(precision) == (scaler != nullptr),
              "[train] --device cuda: fp16 needs the run's loss scaler, other precisions none");
    if (scaler) device_.use_loss_scaler(scaler);
    device_.bind_optimizer(optimizer_);
    optimizer_.set_loss_scaler(scaler);
    inputs_.resize(static_cast<size_t>(B) * T);
    targets_.resize(static_cast<size_t>(B) * T);
    dp_.attach(optimizer_);
  }

  void upload(const float* params, const Optimizer& optimizer) override {
    device_.upload_params(params);
    optimizer_.upload_state(optimizer);
    ctx_.synchronize();
    dp_.masters_uploaded();
  }

  StepStats step(const NextBatchFn& next_batch, int accum, float lr, float grad_clip, int64_t t) override {
    MPT_CHECK(accum > 0, "[train] gradient accumulation steps must be positive");
    StepStats stats;
    stats.loss_scale = scaler_ ? scaler_->scale() : 1.0f;
    double loss_sum = 0.0;
    for (int micro = 0; micro < accum; ++micro) {
      next_batch(inputs_.data(), targets_.data());
      // The last micro-batch's ranges are final as its backward goes: reduce them meanwhile.
      if (micro == accum - 1) overlap_reduction(true);
      // The first micro-batch writes the gradients (the CPU step's zero), the rest add.
      loss_sum += device_.forward_backward(inputs_.data(), targets_.data(), B_, T_,
                                           stats.loss_scale / static_cast<float>(accum), micro > 0);
    }
    overlap_reduction(false);
    if (cuda::finish_step(stats, loss_sum, accum, lr, grad_clip, t, optimizer_, dp_, ctx_))
      curvature(stats, grad_clip);
    return stats;
  }

  // A collective when a 16-bit ZeRO-1 gather left the masters stale (every rank calls it then).
  void download_params(float* params) override {
    dp_.whole_masters(optimizer_, ctx_);
    device_.download_params(params);
  }
  void download_state(Optimizer& optimizer) override { optimizer_.download_state(optimizer); }
  void download_grads(float* grads) override { device_.download_grads(grads); }
  double take_comm_seconds() override { return dp_.take_comm_seconds(); }

 private:
  // train/step.cpp's curvature pass: the step's last micro-batch (inputs_ still holds it),
  // labels drawn with the optimizer's (seed, counter) into targets_, the gradient of their
  // mean loss times the scaler's current scale, the one the unscale divides by (this step's
  // update may have grown it past stats.loss_scale; written over the training gradients, which
  // the update has consumed), then the optimizer's unscale/norm/clip/Hessian update.
  void curvature(StepStats& stats, float grad_clip) {
    overlap_reduction(true);
    const float scale = scaler_ ? scaler_->scale() : 1.0f;
    const float loss = device_.forward_backward_sampled(inputs_.data(), targets_.data(), B_, T_, scale,
                                                        optimizer_.curvature_seed(), optimizer_.curvature_counter());
    overlap_reduction(false);
    cuda::finish_curvature(stats, loss, grad_clip, optimizer_, dp_);
  }

  void overlap_reduction(bool on) { cuda::overlap_reduction(device_, dp_, optimizer_, ctx_, on); }

  cuda::Context ctx_;
  cuda::Gpt2Device device_;
  cuda::DeviceOptimizer optimizer_;
  cuda::DeviceDataParallel dp_;  // after ctx_: NCCL's set-up needs the rank's GPU current
  LossScaler* scaler_;
  int B_, T_;
  std::vector<int> inputs_, targets_;
};

}  // namespace

std::unique_ptr<DeviceStepper> make_gpt2_cuda_stepper(const Gpt2Config& config, Precision precision, int B, int T,
                                                      const Optimizer& optimizer, LossScaler* scaler,
                                                      const DeviceParallel& par) {
  const int devices = cuda_device_count();
  if (devices == 0)
    throw Error("[train] --device cuda: no CUDA device is visible (" + std::to_string(devices) + " devices)");
  return std::make_unique<Gpt2CudaStepper>(config, precision, B, T, optimizer, scaler, par);
}

}  // namespace mptrain
