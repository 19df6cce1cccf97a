// What the GPT-2 and BERT device steppers (gpt2_device_step.cpp, bert_device_step.cpp) do alike
// around their model's passes, in train/step.cpp's order: the gradient-ready hook switched on for
// the passes whose reductions overlap the backward, then after the micro-batches the loss over
// ranks, the guarded update and the ZeRO-1 gather, and after Sophia's sampled pass the curvature
// update. Only the passes themselves (and where each model's batches come from) differ.
#pragma once
#include <cstdint>

#include "backend/cuda/context.h"
#include "backend/cuda/device_data_parallel.h"
#include "backend/cuda/device_optimizer.h"
#include "train/step.h"

namespace mptrain::cuda {

// With NCCL, on: each gradient range the model's backward finishes is averaged over ranks on
// NCCL's stream (every rank, or under ZeRO-1 the ranks whose shards hold it); off: no hook.
// Model: Gpt2Device or BertDevice (set_grad_ready).
template <class Model>
void overlap_reduction(Model& model, DeviceDataParallel& dp, DeviceOptimizer& optimizer, Context& ctx,
                       bool on) {
  if (dp.active()) model.set_grad_ready(on ? dp.grad_ready(optimizer, ctx) : nullptr);
}

// After the step's accum micro-batches, whose mean losses add up to loss_sum on this rank: the
// loss averaged over ranks and micro-batches into stats, the guarded update (fp16 skip, numeric
// guard, clip, AdamW or Sophia), and after an update the ZeRO-1 gather. Returns whether Sophia's
// curvature pass is due now.
bool finish_step(StepStats& stats, double loss_sum, int accum, float lr, float grad_clip, int64_t t,
                 DeviceOptimizer& optimizer, DeviceDataParallel& dp, Context& ctx);

// After the sampled pass, whose mean loss on this rank is `loss`: the loss averaged over ranks
// and the optimizer's unscale/norm/clip/Hessian update, into stats.
void finish_curvature(StepStats& stats, double loss, float grad_clip, DeviceOptimizer& optimizer,
                      DeviceDataParallel& dp);

}  // namespace mptrain::cuda
