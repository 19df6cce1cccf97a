// train/bert_device_step.h on the GPU: cuda::BertDevice driven with train_step's order (the
// micro-batches' gradients accumulated with loss_scale/accum, the first written, the rest
// added), then cuda::DeviceOptimizer (fp16 unscale/skip through the trainer's LossScaler, the
// numeric guard, clip, AdamW or Sophia and the 16-bit copy), and Sophia's curvature pass on the
// step's last micro-batch (BertDevice::forward_backward_sampled with the optimizer's seed and
// counter). One GPU: the data-parallel paths of the GPT-2 stepper are not wired for BERT yet.
#include "train/bert_device_step.h"

#include <memory>
#include <string>

#include "backend/cuda/bert_device.h"
#include "backend/cuda/context.h"
#include "backend/cuda/device_optimizer.h"
#include "core/error.h"
#include "dist/data_parallel.h"

namespace mptrain {

namespace {

void check_one_gpu(const DeviceParallel& par) {
  const bool parallel = par.dp && (par.nccl || par.dp->world_size() > 1 || par.dp->zero() != ZeroStage::Off);
  MPT_CHECK(!parallel,
            "[train] --device cuda --model bert runs on one GPU (no NCCL data parallelism or ZeRO yet)");
}

class BertCudaStepper final : public DeviceStepper {
 public:
  BertCudaStepper(const BertConfig& config, Precision precision, int B, int T, int max_predictions,
                  const Optimizer& optimizer, LossScaler* scaler, BertMicroBatches batches)
      : ctx_(0),
        device_(config, precision, B, T, max_predictions, ctx_),
        optimizer_(device_.table(), cuda::device_optimizer_config(optimizer), ctx_),
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
  }

  void upload(const float* params, const Optimizer& optimizer) override {
    device_.upload_params(params);
    optimizer_.upload_state(optimizer);
    ctx_.synchronize();
  }

  StepStats step(const NextBatchFn& /*GPT-2's; batches_ feeds BERT*/, int accum, float lr, float grad_clip,
                 int64_t t) override {
    MPT_CHECK(accum > 0, "[train] gradient accumulation steps must be positive");
    StepStats stats;
    stats.loss_scale = scaler_ ? scaler_->scale() : 1.0f;
    double loss_sum = 0.0;
    for (int micro = 0; micro < accum; ++micro) {
      last_ = batches_.next();
      // The first micro-batch writes the gradients (the CPU step's zero), the rest add.
      const BertStats st =
          device_.forward_backward(last_, B_, T_, stats.loss_scale / static_cast<float>(accum), micro > 0);
      batches_.record(st);
      loss_sum += st.loss();
    }
    stats.loss = static_cast<float>(loss_sum / accum);
    const cuda::DeviceOptimizer::GuardedStep g = optimizer_.guarded_step(stats.loss, lr, grad_clip, t);
    stats.grad_norm = g.grad_norm;
    stats.skipped = g.skipped;
    stats.non_finite = g.non_finite;
    if (!g.skipped && !g.non_finite && optimizer_.curvature_due(t)) curvature(stats, grad_clip);
    return stats;
  }

  void download_params(float* params) override { device_.download_params(params); }
  void download_state(Optimizer& optimizer) override { optimizer_.download_state(optimizer); }
  void download_grads(float* grads) override { device_.download_grads(grads); }

 private:
  // train/step.cpp's curvature pass on the step's last micro-batch (last_ still views it): the
  // gradient of the drawn labels' loss times the scaler's current scale, written over the training
  // gradients (the update has consumed them), then unscale/norm/clip/Hessian update.
  void curvature(StepStats& stats, float grad_clip) {
    // The scaler's current scale: the one the unscale divides by (train/step.cpp).
    const BertStats st = device_.forward_backward_sampled(last_, B_, T_, scaler_ ? scaler_->scale() : 1.0f,
                                                          optimizer_.curvature_seed(), optimizer_.curvature_counter());
    stats.curvature_loss = st.loss();
    const cuda::DeviceOptimizer::Curvature c = optimizer_.update_curvature(grad_clip);
    stats.curvature = c.made;
    stats.curvature_norm = c.norm;
    stats.win_rate = c.win_rate;
  }

  cuda::Context ctx_;
  cuda::BertDevice device_;
  cuda::DeviceOptimizer optimizer_;
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
  check_one_gpu(par);
  return std::make_unique<BertCudaStepper>(config, precision, B, T, max_predictions, optimizer, scaler,
                                           std::move(batches));
}

}  // namespace mptrain
