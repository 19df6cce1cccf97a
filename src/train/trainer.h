// The training loop, one for every model family: data, gradient accumulation, clipping, the
// optimizer with a warmup + cosine or linear schedule, precision and fp16 loss scaling, data
// parallelism, numeric guards, validation, sampling, checkpoints, resume, and a log line per step.
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

class TrainTask;

// Trains the model family `task` stands for (train/train_task.h): GPT-2 (train/causal_lm_task.h) or
// BERT (train/bert_task.h). Every flag means the same for both.
TrainSummary run_training(const TrainOptions& options, TrainTask& task);

}  // namespace mptrain
