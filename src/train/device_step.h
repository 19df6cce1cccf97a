// `mptrain train --device cuda`: the training loop's optimizer step on GPU 0, behind an
// interface the host code calls without CUDA headers. Implemented by
// src/backend/cuda/gpt2_device_step.cpp (cuda::Gpt2Device) and, in a build without the CUDA
// backend, by src/backend/nocuda/gpt2_device_step.cpp (one clear Error), so trainer.cpp and
// gpt2_task.cpp call it without an #ifdef.
//
// The device holds the fp32 master parameters and the optimizer state (AdamW m, v or Sophia
// m, h and its Hessian counter) between steps; the host copies (the task's params, the host
// optimizer's state, in the CPU layout checkpoints use) are only brought up to date when the
// loop asks (before validation, samples and checkpoints), and uploaded at the start and after
// a rollback.
#pragma once
#include <cstdint>
#include <memory>

#include "dist/data_parallel.h"
#include "model/gpt2_config.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"
#include "precision/loss_scaler.h"
#include "precision/precision.h"
#include "train/step.h"

namespace mptrain {

// Data parallelism of a device step (docs/dev/cuda.md, "NCCL data parallelism"): the run's host
// DataParallel (ranks, ZeRO stage and this rank's optimizer range: the CPU's partition, so that
// its gather/scatter of the optimizer state make checkpoints whole and resumable on any world
// size), and whether the NCCL path runs even for a world of one (--dist-backend nccl).
struct DeviceParallel {
  DataParallel* dp = nullptr;  // null: one process, no collectives
  bool nccl = false;
};

class DeviceStepper {
 public:
  virtual ~DeviceStepper() = default;
  // params: a host array of the table's total size; optimizer: the run's host optimizer of
  // the stepper's kind over the whole table, or with ZeRO-1 over this rank's range (its state
  // zeros for a new run).
  virtual void upload(const float* params, const Optimizer& optimizer) = 0;
  // One optimizer step with train_step's contract (train/step.h): accum micro-batches from
  // next_batch, their gradients accumulated with loss_scale/accum, fp16 unscale/skip through
  // the scaler given at creation, the numeric guard (non_finite: no update), clip, the update;
  // Sophia's curvature pass when due (StepStats' curvature fields). t: the 1-based step.
  virtual StepStats step(const NextBatchFn& next_batch, int accum, float lr, float grad_clip, int64_t t) = 0;
  // The fp32 master parameters. A collective under ZeRO-1 in bf16/fp16 with NCCL (the steps
  // gather only the 16-bit copy the model reads, so the masters are gathered on demand): every
  // rank calls it at the same points.
  virtual void download_params(float* params) = 0;
  // The optimizer state (and Sophia's Hessian counter) into the host optimizer, for checkpoints
  // (ZeRO-1: this rank's range; the trainer gathers it).
  virtual void download_state(Optimizer& optimizer) = 0;
  // The fp32 gradients of the last step (the numeric guard's message names the bad tensors).
  virtual void download_grads(float* grads) = 0;
  // Seconds the host waited for collectives since the last call (then reset): with the
  // reduction overlapped, the communication the backward did not hide. 0 without NCCL.
  virtual double take_comm_seconds() { return 0.0; }
};

// GPT-2 for micro-batches of B×T on this rank's GPU (the local rank's; GPU 0 in one process),
// with the kind and hyper-parameters of `optimizer` (AdamW or Sophia; the host one, whose state
// checkpoints carry). scaler: the trainer's fp16 loss scaler (its state goes into checkpoints;
// null in other precisions). par: data parallelism over NCCL (a collective: every rank creates
// its stepper at the same point). Throws Error when this build has no CUDA backend or no GPU
// is visible.
std::unique_ptr<DeviceStepper> make_gpt2_cuda_stepper(const Gpt2Config& config, Precision precision, int B, int T,
                                                      const Optimizer& optimizer, LossScaler* scaler,
                                                      const DeviceParallel& par = {});

}  // namespace mptrain
