// GPT-2 as a TrainTask (train/train_task.h): token shards through TokenLoader, Gpt2 in any
// precision, Sophia's sampled-label pass, validation loss, text samples, GPT-2 checkpoints
// (train/checkpoint.h).
#pragma once
#include <memory>

#include "train/train_task.h"
#include "train/trainer.h"

namespace mptrain {

// decode turns ids into text for the samples (may be empty: ids are printed); eot_token is
// the samples' prompt.
std::unique_ptr<TrainTask> make_gpt2_task(const DecodeFn& decode, int eot_token);

}  // namespace mptrain
