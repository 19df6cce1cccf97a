// The causal language models as TrainTasks (train/train_task.h): token shards through
// TokenLoader, GPT-2 or Llama in any precision, Sophia's sampled-label pass, validation loss, text
// samples, their checkpoints (train/checkpoint.h, train/llama_checkpoint.h).
#pragma once
#include <memory>

#include "train/train_task.h"

namespace mptrain {

// The token-stream families' tasks (train/causal_lm_task.cpp): GPT-2's and Llama's. Each chooses
// its tokenizer once (configure): --vocab-dir's, else the checkpoint's own, else GPT-2's as found
// by data/gpt2_tokenizer.h's search; the samples decode with it, and every checkpoint of the run
// carries its files (tokenizer_files), as a Hugging Face folder does.
std::unique_ptr<TrainTask> make_gpt2_task(const TaskSpec& spec);
std::unique_ptr<TrainTask> make_llama_task(const TaskSpec& spec);

}  // namespace mptrain
