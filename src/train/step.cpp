// One optimizer step.
#include "train/step.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "optim/grad_norm.h"
#include "train/numeric_guard.h"

namespace mptrain {

namespace {

// The 1-D view of grads[lo, lo + count).
View range_of(float* grads, size_t lo, size_t count) {
  return View::f32(grads + lo, {static_cast<std::int64_t>(count)});
}

// The optimizer's update of every parameter. Without data parallelism the update may also write
// the GEMM weight copies as it writes the weights (AdamW on the CPU): one pass over the fp32
// weights instead of two (the refresh at the next forward re-reads all of them). Under data
// parallelism the weights a rank does not update arrive by collective, so the copies stay for
// the refresh.
void update_weights(const StepModel& model, Optimizer& optimizer, DataParallel* dp, float lr, int64_t t,
                    float clip) {
  if (dp) {
    dp->optimizer_step(optimizer, model.params(), *model.grads, lr, t, clip);
    return;
  }
  float* params = model.params().data();  // marks the copies stale
  if (!model.copies) {
    optimizer.step(params, model.grads->data(), lr, t, clip);
    return;
  }
  const std::vector<ToOperandArgs> copies = model.copies->operand_refresh(params);
  if (optimizer.step(params, model.grads->data(), lr, t, clip, copies)) model.copies->operands_written();
}

}  // namespace

StepModel core_step_model(ModelCore& core) {
  StepModel m;
  m.table = &core.table();
  m.params = [&core]() -> FloatBuffer& { return core.params(); };  // marks the weight copies stale
  m.grads = &core.grads();
  m.set_grads_ready_hook = [&core](GradsReadyHook hook) { core.set_grads_ready_hook(std::move(hook)); };
  m.copies = &core.weight_copies();
  return m;
}

// The step's arithmetic (unscale, norm, clip, update, curvature) is the backend's optimizer ops,
// on the backend the optimizer runs on (the model's); what stays here is the order, the
// collectives and the decisions, so every device runs the same step.
StepStats train_step(const StepModel& model, Optimizer& optimizer, int accum, float lr, float grad_clip, int64_t t,
                     LossScaler* scaler, DataParallel* dp, bool fault_inf_grad) {
  MPT_CHECK(!fault_inf_grad || scaler, "an injected inf gradient needs fp16 loss scaling (nothing would skip the step)");
  Backend& be = optimizer.backend();
  // Without data parallelism: one process, its optimizer over the whole buffer.
  float* grads = model.grads->data();
  const size_t lo = dp ? dp->begin() : 0, count = dp ? dp->end() - lo : model.grads->size();
  const View mine = range_of(grads, lo, count);  // this rank's range: the optimizer's
  const int world = dp ? dp->world_size() : 1;
  // The norm of the averaged gradient over all ranks, from this rank's range.
  const auto norm_of_grads = [&] {
    const double local = std::sqrt(be.sum_squares(mine));
    return dp ? dp->global_norm(local) : local;
  };
  // Overlapped reduction (dist/data_parallel.h): the hook hands each range to dp, which reduces
  // those of an armed backward (the step's last micro-batch, the curvature pass).
  if (dp && dp->overlaps()) {
    MPT_CHECK(model.set_grads_ready_hook != nullptr,
              "this model hands no gradient ranges: its reduction cannot overlap the backward");
    model.set_grads_ready_hook([dp, grads = model.grads](ParamRange r) { dp->reduce_ready(*grads, r); });
  }
  const auto zero_grads = [&] { dp ? dp->zero_gradients(*model.grads) : model.grads->zero(); };
  zero_grads();
  StepStats stats;
  stats.loss_scale = scaler ? scaler->scale() : 1.0f;
  double loss_sum = 0.0;
  for (int micro = 0; micro < accum; ++micro) {
    // Each micro-batch's mean loss is scaled by 1/accum so the gradients add up to the
    // gradient of the mean over the whole step.
    if (dp) dp->arm(micro == accum - 1);
    loss_sum += model.micro_step(stats.loss_scale / static_cast<float>(accum));
    if (dp) dp->after_backward(*model.grads);
  }
  if (dp) {
    loss_sum = dp->comm().sum(loss_sum);
    dp->average_gradients(*model.grads);  // grads[lo, lo + count) now hold the mean over ranks
  }
  stats.loss = static_cast<float>(loss_sum / (static_cast<double>(accum) * world));
  if (fault_inf_grad && count > 0) {
    const float inf = std::numeric_limits<float>::infinity();
    model.grads->upload(&inf, 1, lo);  // wherever the gradients live
  }
  inject_test_nan(*model.table, *model.grads, lo, lo + count, t);  // test-only (train/numeric_guard.h)
  if (scaler) {
    bool found_inf = be.unscale_and_check(mine, scaler->inv_scale());
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
  stats.grad_norm = norm_of_grads();
  if (!std::isfinite(stats.grad_norm) || !std::isfinite(stats.loss)) {
    stats.non_finite = true;
    return stats;
  }
  // Clipping's factor goes into the update (Optimizer::step's grad_scale): no pass of its own.
  const float clip = clip_coefficient(stats.grad_norm, grad_clip);
  update_weights(model, optimizer, dp, lr, t, clip);
  if (optimizer.curvature_due(t)) {
    zero_grads();
    MPT_CHECK(model.curvature != nullptr, "this model has no curvature pass for the optimizer's Hessian estimate");
    // Scaled by the scale unscale_and_check divides by below: the scaler's current one, which
    // this step's clean update may have grown past stats.loss_scale.
    const float curvature_scale = scaler ? scaler->scale() : 1.0f;
    if (dp) dp->arm(true);
    stats.curvature_loss = model.curvature(curvature_scale, optimizer.curvature_seed(), optimizer.curvature_counter());
    if (dp) {
      dp->after_backward(*model.grads);
      stats.curvature_loss = static_cast<float>(dp->comm().sum(stats.curvature_loss) / world);
      dp->average_gradients(*model.grads);
    }
    bool found_inf = scaler && be.unscale_and_check(mine, scaler->inv_scale());
    if (dp) found_inf = dp->comm().any(found_inf);
    if (found_inf) return stats;
    // Without a scaler, a non-finite estimate is dropped here (the numeric guard's rule).
    stats.curvature_norm = norm_of_grads();
    if (!std::isfinite(stats.curvature_norm)) return stats;
    const float factor = clip_coefficient(stats.curvature_norm, grad_clip);
    if (factor != 1.0f) be.scale(mine, factor);
    const double local_win_rate = optimizer.update_curvature(grads + lo);
    stats.win_rate = dp ? dp->global_fraction(local_win_rate) : local_win_rate;
    stats.curvature = true;
  }
  return stats;
}

StepModel causal_lm_step_model(CausalLm& model, const NextBatchFn& next_batch, int B, int T, int* inputs,
                               int* targets) {
  StepModel m = core_step_model(model);
  m.micro_step = [&model, next_batch, B, T, inputs, targets](float grad_scale) {
    next_batch(inputs, targets);
    return model.forward_backward(inputs, targets, B, T, grad_scale);
  };
  // Sophia's estimate reuses the step's last micro-batch (inputs still holds it) and targets
  // as the buffer for the sampled labels.
  m.curvature = [&model, B, T, inputs, targets](float grad_scale, uint64_t seed, uint64_t counter) {
    return model.forward_backward_sampled(inputs, targets, B, T, grad_scale, seed, counter);
  };
  return m;
}

StepStats train_step(CausalLm& model, Optimizer& optimizer, const NextBatchFn& next_batch, int B, int T, int accum, float lr,
                     float grad_clip, int64_t t, int* inputs, int* targets, LossScaler* scaler, DataParallel* dp,
                     bool fault_inf_grad) {
  return train_step(causal_lm_step_model(model, next_batch, B, T, inputs, targets), optimizer, accum, lr, grad_clip,
                    t, scaler, dp, fault_inf_grad);
}

}  // namespace mptrain
