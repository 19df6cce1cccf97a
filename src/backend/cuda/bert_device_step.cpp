// train/bert_device_step.h on the GPU: cuda::BertDevice driven with train_step's order (the
// micro-batches' gradients accumulated with loss_scale/accum, the first written, the rest
// added), then cuda::DeviceOptimizer (fp16 unscale/skip through the trainer's LossScaler, the
// numeric guard, clip, AdamW or Sophia and the 16-bit copy), and Sophia's curvature pass on the
// step's last micro-batch (BertDevice::forward_backward_sampled with the optimizer's seed and
// counter).
//
// Data parallelism (train/device_step.h's DeviceParallel) through cuda::DeviceDataParallel, the
// GPT-2 stepper's: NCCL over the launcher's ranks (or a world of one with --dist-backend nccl),
// the fp32 gradients averaged over ranks (all-reduce, or under ZeRO-1 reduced onto the CPU's
// partition with this rank's DeviceOptimizer over its range), the loss summed, the ZeRO-1
// all-gather of the parameters after the update. Overlap, as the GPT-2 stepper: during the last
// micro-batch (and the curvature pass) BertDevice's gradient-ready hook hands each range (the
// heads, layer L-1 ... 0, the embeddings with the tied word embeddings) to NCCL's stream as soon
// as the backward has enqueued it (nccl_async.h), so the reduction of a layer's gradients runs
// while the backward of the layers before it computes; the optimizer waits for all of them.
#include "train/bert_device_step.h"

#include <memory>
#include <string>

#include "backend/cuda/bert_device.h"
#include "backend/cuda/context.h"
#include "backend/cuda/device_data_parallel.h"
#include "backend/cuda/device_optimizer.h"
#include "backend/cuda/device_step_common.h"
#include "core/error.h"

namespace mptrain {

namespace {

class BertCudaStepper final : public DeviceStepper {
 public:
  BertCudaStepper(const BertConfig& config, Precision precision, int B, int T, int max_predictions,
                  const Optimizer& optimizer, LossScaler* scaler, const DeviceParallel& par,
                  BertMicroBatches batches)
      : ctx_(cuda::DeviceDataParallel::device_of(par)),
        device_(config, precision, B, T, max_predictions, ctx_),
        optimizer_(device_.table(), cuda::device_optimizer_config(optimizer), ctx_,
                   cuda::DeviceDataParallel::owned_segments(par)),
        dp_(par),
        scaler_(scaler),
        batches_(std::move(batches)),
        B_(B),
        T_(T) {
    MPT_CHECK(needs_loss_scaler(precision) == (scaler != nullptr),
              "[train] --device cuda: fp16 needs the run's loss scaler, other precisions none");
    MPT_CHECK(batches_.next && batches_.record,
              "[train] the BERT device stepper needs its micro-batch source");
    optimizer_.bind(device_.params_device(), device_.grads_device(), device_.params_lowp_device(),
                    device_.storage());
    optimizer_.set_loss_scaler(scaler);
    dp_.attach(optimizer_);
  }

  void upload(const float* params, const Optimizer& optimizer) override {
    device_.upload_params(params);
    optimizer_.upload_state(optimizer);
    ctx_.synchronize();
    dp_.masters_uploaded();
  }

  StepStats step(const NextBatchFn& /*GPT-2's; batches_ feeds BERT*/, int accum, float lr, float grad_clip,
                 int64_t t) override {
    MPT_CHECK(accum > 0, "[train] gradient accumulation steps must be positive");
    StepStats stats;
    stats.loss_scale = scaler_ ? scaler_->scale() : 1.0f;
    double loss_sum = 0.0;
    for (int micro = 0; micro < accum; ++micro) {
      last_ = batches_.next();
      // The last micro-batch's ranges are final as its backward goes: reduce them meanwhile.
      if (micro == accum - 1) overlap_reduction(true);
      // The first micro-batch writes the gradients (the CPU step's zero), the rest add.
      const BertStats st =
          device_.forward_backward(last_, B_, T_, stats.loss_scale / static_cast<float>(accum), micro > 0);
      batches_.record(st);
      loss_sum += st.loss();
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
  // train/step.cpp's curvature pass on the step's last micro-batch (last_ still views it): the
  // gradient of the drawn labels' loss times the scaler's current scale, written over the training
  // gradients (the update has consumed them), then unscale/norm/clip/Hessian update.
  void curvature(StepStats& stats, float grad_clip) {
    overlap_reduction(true);
    // The scaler's current scale: the one the unscale divides by (train/step.cpp).
    const BertStats st = device_.forward_backward_sampled(last_, B_, T_, scaler_ ? scaler_->scale() : 1.0f,
                                                          optimizer_.curvature_seed(), optimizer_.curvature_counter());
    overlap_reduction(false);
    cuda::finish_curvature(stats, st.loss(), grad_clip, optimizer_, dp_);
  }

  void overlap_reduction(bool on) { cuda::overlap_reduction(device_, dp_, optimizer_, ctx_, on); }

  cuda::Context ctx_;
  cuda::BertDevice device_;
  cuda::DeviceOptimizer optimizer_;
  cuda::DeviceDataParallel dp_;  // after ctx_: NCCL's set-up needs the rank's GPU current
  LossScaler* scaler_;
  BertMicroBatches batches_;
  BertInputs last_;
  int B_, T_;
};

}  // namespace

std::unique_ptr<DeviceStepper> make_bert_cuda_stepper(const BertConfig& config, Precision precision, int B,
                                                      int T, int max_predictions, const Optimizer& optimizer,
                                                      LossScaler* scaler, const DeviceParallel& par,
                                                      BertMicroBatches batches) {
  return std::make_unique<BertCudaStepper>(config, precision, B, T, max_predictions, optimizer, scaler, par,
                                           std::move(batches));
}

}  // namespace mptrain
