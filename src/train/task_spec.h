// The description of a run a model family's task is built from (train/train_task.h), made once
// from the options (TrainOptions::task_spec): the task keeps it, and none of its methods takes
// the options.
#pragma once
#include <cstdint>
#include <string>

#include "model/llama_config.h"
#include "model/recompute.h"

namespace mptrain {

// What a family's task reads of a run: the model to build from scratch (a checkpoint's config
// wins), the data, the micro-batch, validation and samples, and where its checkpoints go.
struct TaskSpec {
  std::string preset;
  int vocab_multiple = 128;
  int vocab_size = 0;  // GPT-2/Llama from scratch: the tokenizer's vocabulary (0: GPT-2's)
  LlamaBlockOptions llama_block;
  std::string train_data, val_data;
  int batch = 4, seq = 256;  // B, T (BERT's T may come from its instance file: TrainTask::seq)
  bool shuffle = false;      // GPT-2/Llama: the token streams in a new order each epoch
  bool graphs = false;       // --graphs on (GPT-2)
  RecomputeSet recompute;    // --recompute (GPT-2; model/recompute.h)
  int val_steps = 20;
  int sample_tokens = 64;
  uint64_t seed = 1337;
  std::string run_dir;
  std::string vocab_dir;  // GPT-2/Llama: --vocab-dir, the samples' tokenizer (data/gpt2_tokenizer.h)
};

}  // namespace mptrain
