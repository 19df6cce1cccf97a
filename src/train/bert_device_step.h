// `mptrain train --device cuda --model bert`: BERT's training step on the GPU behind
// train/device_step.h's DeviceStepper (cuda::BertDevice for the model half, cuda::DeviceOptimizer
// for the update). Implemented by src/backend/cuda/bert_device_step.cpp and, in a build without
// the CUDA backend, by src/backend/nocuda/bert_device_step.cpp (one clear Error).
#pragma once
#include <functional>
#include <memory>

#include "model/bert.h"
#include "model/bert_config.h"
#include "optim/optimizer.h"
#include "precision/loss_scaler.h"
#include "precision/precision.h"
#include "train/device_step.h"

namespace mptrain {

// Where BERT's micro-batches come from: DeviceStepper::step's NextBatchFn is GPT-2's (tokens,
// targets), so the BERT stepper ignores it and asks the task instead. next() advances the
// training loader and returns the views of its batch (valid until the next call: the curvature
// pass reuses the step's last one); record() receives each micro-batch's stats (the task's
// MLM/NSP sums for the log line).
struct BertMicroBatches {
  std::function<BertInputs()> next;
  std::function<void(const BertStats&)> record;
};

// BERT on this rank's GPU (the local rank's; GPU 0 in one process) for micro-batches of B×T
// with at most max_predictions masked positions in all, with the kind and hyper-parameters of
// `optimizer` (AdamW or Sophia; the host one, whose state checkpoints carry). scaler: the
// trainer's fp16 loss scaler (null in other precisions). par: data parallelism over NCCL, ZeRO-1
// included (a collective: every rank creates its stepper at the same point). Throws Error when
// this build has no CUDA backend or no GPU is visible.
std::unique_ptr<DeviceStepper> make_bert_cuda_stepper(const BertConfig& config, Precision precision, int B,
                                                      int T, int max_predictions, const Optimizer& optimizer,
                                                      LossScaler* scaler, const DeviceParallel& par,
                                                      BertMicroBatches batches);

}  // namespace mptrain
