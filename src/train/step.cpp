// One optimizer step.
#include "train/step.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "optim/grad_norm.h"
#include "train/numeric_guard.h"

namespace mptrain {

StepStats train_step(const StepModel& model, Optimizer& optimizer, int accum, float lr, float grad_clip, int64_t t,
                     LossScaler* scaler, DataParallel* dp, bool fault_inf_grad) {
  MPT_CHECK(!fault_inf_grad || scaler, "an injected inf gradient needs fp16 loss scaling (nothing would skip the step)");
  // Without data parallelism: one process, its optimizer over the whole buffer.
  float* grads = model.grads->data();
  const size_t lo = dp ? dp->begin() : 0, count = dp ? dp->end() - lo : model.grads->size();
  const int world = dp ? dp->world_size() : 1;
  model.grads->zero();
  StepStats stats;
  stats.loss_scale = scaler ? scaler->scale() : 1.0f;
  double loss_sum = 0.0;
  for (int micro = 0; micro < accum; ++micro) {
    // Each micro-batch's mean loss is scaled by 1/accum so the gradients add up to the
    // gradient of the mean over the whole step.
    loss_sum += model.micro_step(stats.loss_scale / static_cast<float>(accum));
  }
  if (dp) {
    loss_sum = dp->comm().sum(loss_sum);
    dp->average_gradients(grads);  // grads[lo, lo + count) now hold the mean over ranks
  }
  stats.loss = static_cast<float>(loss_sum / (static_cast<double>(accum) * world));
  if (fault_inf_grad && count > 0) grads[lo] = std::numeric_limits<float>::infinity();
  inject_test_nan(*model.table, grads, lo, lo + count, t);  // test-only (train/numeric_guard.h)
  if (scaler) {
    bool found_inf = scaler->unscale_and_check(grads + lo, count);
    if (dp) found_inf = dp->comm().any(found_inf);  // every rank skips, or none
    scaler->update(found_inf);
    if (found_inf) {
      stats.skipped = true;
      stats.grad_norm = std::numeric_limits<double>::infinity();
      return stats;
    }
  }
  // Numeric guard (train/numeric_guard.h): a non-finite loss or norm (fp32/bf16; fp16's
  // scaler skipped such steps above) returns before the weights or optimizer state change.
  // The norm and the loss are global, so every rank returns here alike.
  stats.grad_norm = dp ? dp->global_norm(grads) : global_norm(grads, count);
  if (!std::isfinite(stats.grad_norm) || !std::isfinite(stats.loss)) {
    stats.non_finite = true;
    return stats;
  }
  // Clipping's factor goes into the update (Optimizer::step's grad_scale): no pass of its own.
  const float clip = clip_coefficient(stats.grad_norm, grad_clip);
  if (dp)
    dp->optimizer_step(optimizer, model.params().data(), grads, lr, t, clip);
  else
    optimizer.step(model.params().data(), grads, lr, t, clip);
  if (optimizer.curvature_due(t)) {
    const size_t n = model.grads->size();
    model.grads->zero();
    MPT_CHECK(model.curvature != nullptr, "this model has no curvature pass for the optimizer's Hessian estimate");
    // Scaled by the scale unscale_and_check divides by below: the scaler's current one, which
    // this step's clean update may have grown past stats.loss_scale.
    const float curvature_scale = scaler ? scaler->scale() : 1.0f;
    stats.curvature_loss = model.curvature(curvature_scale, optimizer.curvature_seed(), optimizer.curvature_counter());
    if (dp) {
      stats.curvature_loss = static_cast<float>(dp->comm().sum(stats.curvature_loss) / world);
      dp->average_gradients(grads);
    }
    bool found_inf = scaler && scaler->unscale_and_check(grads + lo, count);
    if (dp) found_inf = dp->comm().any(found_inf);
    if (found_inf) return stats;
    // Without a scaler, a non-finite estimate is dropped here (the numeric guard's rule).
    stats.curvature_norm = dp ? dp->global_norm(grads) : global_norm(grads, n);
    if (!std::isfinite(stats.curvature_norm)) return stats;
    if (dp) {
      dp->clip(grads, stats.curvature_norm, grad_clip);
      stats.win_rate = dp->global_fraction(optimizer.update_curvature(grads + lo));
    } else {
      clip_grad_norm(grads, n, stats.curvature_norm, grad_clip);
      stats.win_rate = optimizer.update_curvature(grads);
    }
    stats.curvature = true;
  }
  return stats;
}

StepStats train_step(Gpt2& model, Optimizer& optimizer, const NextBatchFn& next_batch, int B, int T, int accum, float lr,
                     float grad_clip, int64_t t, int* inputs, int* targets, LossScaler* scaler, DataParallel* dp,
                     bool fault_inf_grad) {
  StepModel m;
  m.table = &model.table();
  m.params = [&model]() -> FloatBuffer& { return model.params(); };  // marks GPT-2's weight copies stale
  m.grads = &model.grads();
  m.micro_step = [&](float grad_scale) {
    next_batch(inputs, targets);
    return model.forward_backward(inputs, targets, B, T, grad_scale);
  };
  // Sophia's estimate reuses the step's last micro-batch (inputs still holds it) and targets
  // as the buffer for the sampled labels.
  m.curvature = [&](float grad_scale, uint64_t seed, uint64_t counter) {
    return model.forward_backward_sampled(inputs, targets, B, T, grad_scale, seed, counter);
  };
  return train_step(m, optimizer, accum, lr, grad_clip, t, scaler, dp, fault_inf_grad);
}

}  // namespace mptrain
