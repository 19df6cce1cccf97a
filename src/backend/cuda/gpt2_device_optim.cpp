// cuda::Gpt2Device's optimizer step (gpt2_device.h): fp16 unscale and inf check, the global
// gradient norm and clip factor, the numeric guard and one AdamW launch over every parameter,
// all on the device; and the AdamW moments' uploads and downloads.
#include <cmath>
#include <limits>

#include "backend/cuda/adamw.h"
#include "backend/cuda/grad_norm.h"
#include "backend/cuda/gpt2_device_impl.h"
#include "backend/cuda/loss_scale.h"
#include "core/error.h"

namespace mptrain::cuda {

// One AdamW launch over every parameter: the clip factor grad_norm left on the device scales
// the gradients; skip (nullable, device) is fp16's overflow flag; writes the 16-bit copy.
void Gpt2Device::Impl::adamw(float lr, const AdamWHyper& hyper, int64_t step, const int* skip) {
  AdamWArgs args;
  args.lr = lr;
  args.beta1 = hyper.beta1;
  args.beta2 = hyper.beta2;
  args.eps = hyper.eps;
  args.weight_decay = hyper.weight_decay;
  args.t = step;
  args.grad_scale = at<float>(clip);
  args.skip = skip;
  adamw_update(static_cast<float*>(params.get()), static_cast<const float*>(grads.get()),
               static_cast<float*>(m.get()), static_cast<float*>(v.get()), static_cast<const uint32_t*>(mask.get()),
               n, args, lowp ? params_lp.get() : nullptr, lowp ? t : StorageType::BF16, ctx);
}

bool Gpt2Device::step(float lr, const AdamWHyper& hyper, float grad_clip, int64_t t) {
  Impl& im = *impl_;
  float* grads = static_cast<float*>(im.grads.get());
  int* found_inf = im.at<int>(im.found_inf);
  LossScaler* scaler = im.active_scaler();
  if (scaler) {
    fill_bytes(found_inf, 0, sizeof(int), im.ctx);
    unscale_and_check(grads, im.n, scaler->scale(), found_inf, im.ctx);
  }
  grad_norm(im.at<double>(im.norm), im.at<float>(im.clip), grads, im.n, grad_clip, im.at<double>(im.norm_scratch),
            im.ctx);
  im.adamw(lr, hyper, t, scaler ? found_inf : nullptr);
  if (!scaler) return true;
  int found = 0;
  copy_to_host(&found, found_inf, sizeof(int), im.ctx);
  scaler->update(found != 0);
  return found == 0;
}

void Gpt2Device::use_loss_scaler(LossScaler* external) {
  MPT_CHECK(external == nullptr || needs_loss_scaler(impl_->precision),
            "[gpt2-cuda] a loss scaler is fp16's alone");
  impl_->external_scaler = external;
}

Gpt2Device::GuardedStep Gpt2Device::guarded_step(float loss, float lr, const AdamWHyper& hyper, float grad_clip,
                                                 int64_t t) {
  Impl& im = *impl_;
  float* grads = static_cast<float*>(im.grads.get());
  LossScaler* scaler = im.active_scaler();
  GuardedStep r;
  if (scaler) {  // train/step.cpp: unscale, check, update the scale; a hit skips the step
    int* found_inf = im.at<int>(im.found_inf);
    fill_bytes(found_inf, 0, sizeof(int), im.ctx);
    unscale_and_check(grads, im.n, scaler->scale(), found_inf, im.ctx);
    int found = 0;
    copy_to_host(&found, found_inf, sizeof(int), im.ctx);
    scaler->update(found != 0);
    if (found != 0) {
      r.skipped = true;
      r.grad_norm = std::numeric_limits<double>::infinity();
      return r;
    }
  }
  grad_norm(im.at<double>(im.norm), im.at<float>(im.clip), grads, im.n, grad_clip, im.at<double>(im.norm_scratch),
            im.ctx);
  r.grad_norm = last_grad_norm();
  if (!std::isfinite(r.grad_norm) || !std::isfinite(loss)) {  // the numeric guard: no update
    r.non_finite = true;
    return r;
  }
  im.adamw(lr, hyper, t, nullptr);
  return r;
}

void Gpt2Device::upload_moments(const float* m, const float* v) {
  Impl& im = *impl_;
  copy_to_device(im.m.get(), m, im.n * sizeof(float), im.ctx);
  copy_to_device(im.v.get(), v, im.n * sizeof(float), im.ctx);
  im.ctx.synchronize();
}

void Gpt2Device::download_moments(float* m, float* v) {
  Impl& im = *impl_;
  copy_to_host(m, im.m.get(), im.n * sizeof(float), im.ctx);
  copy_to_host(v, im.v.get(), im.n * sizeof(float), im.ctx);
}

double Gpt2Device::last_grad_norm() {
  double norm = 0.0;
  copy_to_host(&norm, impl_->at<double>(impl_->norm), sizeof(double), impl_->ctx);
  return norm;
}

}  // namespace mptrain::cuda
