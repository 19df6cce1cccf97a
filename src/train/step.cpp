// One optimizer step.
#include "train/step.h"

#include "optim/grad_norm.h"

namespace mptrain {

StepStats train_step(Gpt2& model, AdamW& optimizer, const NextBatchFn& next_batch, int B, int T, int accum, float lr,
                     float grad_clip, int64_t t, int* inputs, int* targets) {
  model.zero_grad();
  double loss_sum = 0.0;
  for (int micro = 0; micro < accum; ++micro) {
    next_batch(inputs, targets);
    // Each micro-batch's mean loss is scaled by 1/accum so the gradients add up to the
    // gradient of the mean over the whole step.
    loss_sum += model.forward_backward(inputs, targets, B, T, 1.0f / static_cast<float>(accum));
  }
  StepStats stats;
  stats.loss = static_cast<float>(loss_sum / accum);
  stats.grad_norm = global_norm(model.grads().data(), model.num_params());
  clip_grad_norm(model.grads().data(), model.num_params(), stats.grad_norm, grad_clip);
  optimizer.step(model.params().data(), model.grads().data(), lr, t);
  return stats;
}

}  // namespace mptrain
