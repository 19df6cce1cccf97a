// The causal language models as TrainTasks (train/train_task.h): token shards through
// TokenLoader, GPT-2 or Llama in any precision, Sophia's sampled-label pass, validation loss, text
// samples, their checkpoints (train/checkpoint.h, train/llama_checkpoint.h).
#pragma once
#include <memory>

#include <functional>
#include <span>
#include <string>

#include "train/train_task.h"

namespace mptrain {

// Turns token ids into text for the samples printed during training.
using DecodeFn = std::function<std::string(std::span<const int>)>;

// The tokenizer behind the samples: decode turns ids into text (may be empty: ids are printed), for a
// model whose vocabulary is no larger than its `vocab` tokens; eot is the samples' prompt.
struct SampleTokenizer {
  DecodeFn decode;
  int eot = 0;
  int vocab = 0;
};

// The token-stream families' tasks (train/causal_lm_task.cpp): GPT-2's and Llama's.
std::unique_ptr<TrainTask> make_gpt2_task(const TaskSpec& spec, const SampleTokenizer& tokenizer);
std::unique_ptr<TrainTask> make_llama_task(const TaskSpec& spec, const SampleTokenizer& tokenizer);

}  // namespace mptrain
