// The training loop, one for every model family: data, gradient accumulation, clipping, the
// optimizer with a warmup + cosine or linear schedule, precision and fp16 loss scaling, data
// parallelism, numeric guards, validation, sampling, checkpoints, resume, and a log line per step.
#pragma once
#include <memory>
#include <string>

#include "train/options.h"
#include "train/summary.h"

namespace mptrain {

class TrainTask;

// Trains the model family `task` stands for (train/train_task.h): GPT-2 (train/causal_lm_task.h) or
// Llama (the same file) or BERT (train/bert_task.h). Every flag means the same for all.
TrainSummary run_training(const TrainOptions& options, TrainTask& task);

}  // namespace mptrain
