// cuda::Gpt2Device's optimizer step (gpt2_device.h): a thin front for device_optimizer.h's
// AdamW over the model's buffers (made on first use), plus binding another optimizer to them.
#include "backend/cuda/device_optimizer.h"
#include "backend/cuda/gpt2_device_impl.h"
#include "core/error.h"

namespace mptrain::cuda {

DeviceOptimizer& Gpt2Device::Impl::own_optimizer() {
  if (!optimizer) {
    optimizer = std::make_unique<DeviceOptimizer>(table, DeviceOptimizerConfig{}, ctx);
    optimizer->bind(static_cast<float*>(params.get()), static_cast<float*>(grads.get()),
                    lowp ? params_lp.get() : nullptr, lowp ? t : StorageType::BF16);
  }
  optimizer->set_loss_scaler(active_scaler());
  return *optimizer;
}

void Gpt2Device::bind_optimizer(DeviceOptimizer& optimizer) {
  Impl& im = *impl_;
  optimizer.bind(static_cast<float*>(im.params.get()), static_cast<float*>(im.grads.get()),
                 im.lowp ? im.params_lp.get() : nullptr, im.lowp ? im.t : StorageType::BF16);
}

bool Gpt2Device::step(float lr, const AdamWHyper& hyper, float grad_clip, int64_t t) {
  DeviceOptimizer& opt = impl_->own_optimizer();
  opt.set_adamw_hyper(hyper);
  return opt.step(lr, grad_clip, t);
}

void Gpt2Device::use_loss_scaler(LossScaler* external) {
  MPT_CHECK(external == nullptr || needs_loss_scaler(impl_->precision),
            "[gpt2-cuda] a loss scaler is fp16's alone");
  impl_->external_scaler = external;
}

Gpt2Device::GuardedStep Gpt2Device::guarded_step(float loss, float lr, const AdamWHyper& hyper, float grad_clip,
                                                 int64_t t) {
  DeviceOptimizer& opt = impl_->own_optimizer();
  opt.set_adamw_hyper(hyper);
  return opt.guarded_step(loss, lr, grad_clip, t);
}

void Gpt2Device::upload_moments(const float* m, const float* v) {
  impl_->own_optimizer().upload_state(std::vector<const float*>{m, v});
  impl_->ctx.synchronize();
}

void Gpt2Device::download_moments(float* m, float* v) { impl_->own_optimizer().download_state({m, v}); }

double Gpt2Device::last_grad_norm() { return impl_->own_optimizer().last_grad_norm(); }

}  // namespace mptrain::cuda
