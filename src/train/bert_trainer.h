// BERT pretraining (masked LM + next-sentence prediction) from an instance file of
// `mptrain prepare --task bert`, with dynamic masking (data/bert_loader.h). The loop is the
// GPT-2 trainer's shape with BERT's pieces: the step is train_step over a StepModel
// (train/step.h), so accumulation, clipping, AdamW, data parallelism and the numeric guards are
// shared; the log line adds MLM loss, NSP loss and NSP accuracy; validation reports MLM and NSP
// accuracy (train/bert_eval.h); checkpoints use Hugging Face BertForPreTraining names
// (train/bert_checkpoint.h) and resume exactly.
#pragma once
#include <string>

#include "train/options.h"
#include "train/trainer.h"

namespace mptrain {

struct BertTrainOptions {
  int max_predictions = 20;  // masked positions per sequence at most (the recipe's 20 at seq 128)
  bool seq_given = false;    // --seq given: T is that; else the instance file's max_seq_len
};

// options.preset names a BERT preset (bert-mini if it names none); options.train_data is an
// instance file (val_data optional). Sequence length T over the model's positions, an
// optimizer other than AdamW, or a file of another format version: clear errors.
TrainSummary run_bert_training(const TrainOptions& options, const BertTrainOptions& bert);

}  // namespace mptrain
