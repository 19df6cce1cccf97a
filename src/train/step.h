// One optimizer step of training (GPT-2, or any model through StepModel), shared by the trainers and the benchmark:
// zero grads → accumulate micro-batches → global norm → clip → optimizer (AdamW or Sophia)
// → for Sophia every k steps, its Hessian estimate.
#pragma once
#include <cstdint>
#include <functional>

#include "dist/data_parallel.h"
#include "model/causal_lm.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"
#include "precision/loss_scaler.h"

namespace mptrain {

// Fills inputs[B*T] and targets[B*T] with the next micro-batch.
using NextBatchFn = std::function<void(int* inputs, int* targets)>;

// A model as one optimizer step sees it (Gpt2, Bert): flat fp32 parameters and gradients laid
// out by one parameter table, and what one micro-batch does. Each model family's TrainTask
// (train/train_task.h) builds one for the training loop; the GPT-2 overload of train_step below
// builds GPT-2's for the benchmark and the tests.
struct StepModel {
  const ParamTable* table = nullptr;
  // The parameters, asked for again at every write (the optimizer update): Gpt2's non-const
  // params() marks its low-precision weight copies stale there (model/gpt2.h's contract).
  std::function<FloatBuffer&()> params;
  FloatBuffer* grads = nullptr;
  // The next micro-batch: forward, then backward with gradients ACCUMULATED (+=) of
  // grad_scale · its mean loss. Returns that mean loss.
  std::function<float(float grad_scale)> micro_step;
  // Sophia's curvature pass on the step's last micro-batch (labels drawn from the model's own
  // softmax, gradients +=; returns the mean loss on them). Empty: the model has none, and an
  // optimizer that asks for an estimate is refused with an Error.
  std::function<float(float grad_scale, uint64_t seed, uint64_t counter)> curvature;
  // Installs the model's gradient-ready hook (model/weight_grads.h), through which data
  // parallelism reduces each range as the backward finishes it. Empty: the model hands no
  // ranges, and its gradients are reduced after the backward.
  std::function<void(GradsReadyHook)> set_grads_ready_hook;
  // The model's GEMM weight copies: the update writes them in its own pass where the optimizer
  // and backend can (Optimizer::step with copies). Null: the next forward refreshes them.
  WeightCopies* copies = nullptr;
};

// The parts of a StepModel every model fills alike from its core: table, parameters, gradients,
// the gradient-ready hook and the weight copies. The caller adds micro_step (and curvature).
StepModel core_step_model(ModelCore& core);

struct StepStats {
  float loss = 0.0f;  // mean over the micro-batches
  double grad_norm = 0.0;  // before clipping
  bool skipped = false;    // fp16 loss scaling found an inf/NaN gradient: no update was made
  bool non_finite = false; // the loss or the gradient norm was not finite: no update was made
                           // (weights and optimizer state untouched; train/numeric_guard.h)
  float loss_scale = 1.0f; // the scale this step's loss was multiplied by (1 without a scaler)
  // Curvature estimate (Sophia, every k steps; see optim/sophia.h):
  bool curvature = false;        // an estimate was made after this step's update
  float curvature_loss = 0.0f;   // mean loss on the sampled labels
  double curvature_norm = 0.0;   // norm of its gradient before clipping
  double win_rate = 0.0;         // fraction of coordinates whose next update is not clipped
};

// t is the 1-based optimizer step. inputs/targets are scratch of B*T ints each.
// With a LossScaler (fp16), each micro-batch's loss is multiplied by its scale, the
// gradients are unscaled and checked before clipping, a non-finite step is skipped
// (parameters and optimizer state untouched) and the scale is updated.
// When the optimizer asks for a curvature estimate after step t, it is made on the step's
// last micro-batch (inputs still holds it; targets is reused for the sampled labels): labels
// drawn from the model's softmax, gradient of their mean loss (scaled and unscaled like the
// training loss; a non-finite one is dropped), clipped to grad_clip, handed to the optimizer.
// grads() then hold that gradient until the next step zeroes them.
// With data parallelism (dp, see dist/data_parallel.h) the micro-batches are this rank's
// slices: losses and gradients are averaged over ranks, the norm is global, and the
// optimizer (built over dp->optimizer_table()) updates this rank's range, gathered with ZeRO-1.
// fault_inf_grad (testing, needs a scaler): after backward one gradient element of this rank's
// range is set to +inf, as an fp16 overflow would, so the skip path runs as for a real one.
// A causal LM's StepModel: each micro-batch from next_batch into inputs/targets (B·T ints each),
// Sophia's sampled pass on the last one (targets reused for the drawn labels).
StepModel causal_lm_step_model(CausalLm& model, const NextBatchFn& next_batch, int B, int T, int* inputs,
                               int* targets);
StepStats train_step(CausalLm& model, Optimizer& optimizer, const NextBatchFn& next_batch, int B, int T, int accum, float lr,
                     float grad_clip, int64_t t, int* inputs, int* targets, LossScaler* scaler = nullptr,
                     DataParallel* dp = nullptr, bool fault_inf_grad = false);
// The same step for any model: the CausalLm overload is this with causal_lm_step_model.
StepStats train_step(const StepModel& model, Optimizer& optimizer, int accum, float lr, float grad_clip, int64_t t,
                     LossScaler* scaler = nullptr, DataParallel* dp = nullptr, bool fault_inf_grad = false);

}  // namespace mptrain
