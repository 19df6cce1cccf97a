// The causal language models as TrainTasks (train/train_task.h): token shards through
// TokenLoader, GPT-2 or Llama in any precision, Sophia's sampled-label pass, validation loss, text
// samples, their checkpoints (train/checkpoint.h, train/llama_checkpoint.h).
#pragma once
#include <memory>

#include "train/train_task.h"
#include "train/trainer.h"

namespace mptrain {

// decode turns ids into text for the samples (may be empty: ids are printed); eot_token is
// the samples' prompt.
// The token-stream families' tasks (train/causal_lm_task.cpp): GPT-2's and Llama's.
std::unique_ptr<TrainTask> make_gpt2_task(const DecodeFn& decode, int eot_token);
std::unique_ptr<TrainTask> make_llama_task(const DecodeFn& decode, int eot_token);

}  // namespace mptrain
