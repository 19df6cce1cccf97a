// One optimizer step.
#include "train/step.h"

#include <limits>

#include "optim/grad_norm.h"

namespace mptrain {

StepStats train_step(Gpt2& model, Optimizer& optimizer, const NextBatchFn& next_batch, int B, int T, int accum, float lr,
                     float grad_clip, int64_t t, int* inputs, int* targets, LossScaler* scaler) {
  model.zero_grad();
  StepStats stats;
  stats.loss_scale = scaler ? scaler->scale() : 1.0f;
  double loss_sum = 0.0;
  for (int micro = 0; micro < accum; ++micro) {
    next_batch(inputs, targets);
    // Each micro-batch's mean loss is scaled by 1/accum so the gradients add up to the
    // gradient of the mean over the whole step.
    loss_sum += model.forward_backward(inputs, targets, B, T, stats.loss_scale / static_cast<float>(accum));
  }
  stats.loss = static_cast<float>(loss_sum / accum);
  if (scaler) {
    const bool found_inf = scaler->unscale_and_check(model.grads().data(), model.num_params());
    scaler->update(found_inf);
    if (found_inf) {
      stats.skipped = true;
      stats.grad_norm = std::numeric_limits<double>::infinity();
      return stats;
    }
  }
  stats.grad_norm = global_norm(model.grads().data(), model.num_params());
  clip_grad_norm(model.grads().data(), model.num_params(), stats.grad_norm, grad_clip);
  optimizer.step(model.params().data(), model.grads().data(), lr, t);
  if (optimizer.curvature_due(t)) {
    const size_t n = model.num_params();
    model.zero_grad();
    stats.curvature_loss = model.forward_backward_sampled(inputs, targets, B, T, stats.loss_scale,
                                                          optimizer.curvature_seed(), optimizer.curvature_counter());
    if (scaler && scaler->unscale_and_check(model.grads().data(), n)) return stats;
    stats.curvature_norm = global_norm(model.grads().data(), n);
    clip_grad_norm(model.grads().data(), n, stats.curvature_norm, grad_clip);
    stats.win_rate = optimizer.update_curvature(model.grads().data());
    stats.curvature = true;
  }
  return stats;
}

}  // namespace mptrain
