// The training loop: data, gradient accumulation, clipping, AdamW with a warmup +
// cosine schedule, validation, sampling, checkpoints, resume, and a log line per step.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "train/options.h"

namespace mptrain {

// Turns token ids into text for the samples printed during training (may be empty:
// then ids are printed).
using DecodeFn = std::function<std::string(std::span<const int>)>;

struct TrainSummary {
  int64_t steps_done = 0;
  float final_train_loss = 0.0f;
  float final_val_loss = -1.0f;  // -1 when no validation data
  std::string last_checkpoint;
  int stopped_by_signal = 0;  // SIGINT/SIGTERM that ended the run early (checkpoint written); 0 = ran to the end
};

TrainSummary run_training(const TrainOptions& options, const DecodeFn& decode, int eot_token);

}  // namespace mptrain
