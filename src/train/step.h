// One optimizer step of GPT-2 training, shared by the trainer and the benchmark:
// zero grads → accumulate micro-batches → global norm → clip → AdamW.
#pragma once
#include <cstdint>
#include <functional>

#include "model/gpt2.h"
#include "optim/adamw.h"

namespace mptrain {

// Fills inputs[B*T] and targets[B*T] with the next micro-batch.
using NextBatchFn = std::function<void(int* inputs, int* targets)>;

struct StepStats {
  float loss = 0.0f;  // mean over the micro-batches
  double grad_norm = 0.0;  // before clipping
};

// t is the 1-based optimizer step. inputs/targets are scratch of B*T ints each.
StepStats train_step(Gpt2& model, AdamW& optimizer, const NextBatchFn& next_batch, int B, int T, int accum, float lr,
                     float grad_clip, int64_t t, int* inputs, int* targets);

}  // namespace mptrain
