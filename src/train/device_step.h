// `mptrain train --device cuda`: the training loop's optimizer step on GPU 0, behind an
// interface the host code calls without CUDA headers. Implemented by
// src/backend/cuda/gpt2_device_step.cpp (cuda::Gpt2Device) and, in a build without the CUDA
// backend, by src/backend/nocuda/gpt2_device_step.cpp (one clear Error), so trainer.cpp and
// gpt2_task.cpp call it without an #ifdef.
//
// The device holds the fp32 master parameters and the AdamW moments between steps; the host
// copies (the task's params, the AdamW optimizer's m/v) are only brought up to date when the
// loop asks (before validation, samples and checkpoints), and uploaded at the start and after
// a rollback.
#pragma once
#include <cstdint>
#include <memory>

#include "model/gpt2_config.h"
#include "optim/adamw.h"
#include "precision/loss_scaler.h"
#include "precision/precision.h"
#include "train/step.h"

namespace mptrain {

class DeviceStepper {
 public:
  virtual ~DeviceStepper() = default;
  // host arrays of the table's total size: parameters, AdamW m and v (zeros for a new run).
  virtual void upload(const float* params, const float* m, const float* v) = 0;
  // One optimizer step with train_step's contract (train/step.h, AdamW, no data parallelism):
  // accum micro-batches from next_batch, their gradients accumulated with loss_scale/accum,
  // fp16 unscale/skip through the scaler given at creation, the numeric guard (non_finite:
  // no update), clip, AdamW. t: the 1-based optimizer step.
  virtual StepStats step(const NextBatchFn& next_batch, int accum, float lr, float grad_clip, int64_t t) = 0;
  virtual void download_params(float* params) = 0;
  virtual void download_moments(float* m, float* v) = 0;
  // The fp32 gradients of the last step (the numeric guard's message names the bad tensors).
  virtual void download_grads(float* grads) = 0;
};

// GPT-2 with AdamW on GPU 0 for micro-batches of B×T. scaler: the trainer's fp16 loss scaler
// (its state goes into checkpoints; null in other precisions). Throws Error when this build has
// no CUDA backend or no GPU is visible.
std::unique_ptr<DeviceStepper> make_gpt2_cuda_stepper(const Gpt2Config& config, Precision precision, int B, int T,
                                                      const AdamWHyper& hyper, LossScaler* scaler);

}  // namespace mptrain
