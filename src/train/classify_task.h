// Fine-tuning BERT for sequence classification (Hugging Face's BertForSequenceClassification,
// model/bert.h with BertConfig::num_labels) as a TrainTask (train/train_task.h): the one trainer
// gives it every precision, both devices, AdamW/Sophia/Muon, the schedule (linear by default
// through `mptrain finetune`), accumulation, data parallelism, checkpoints and --resume.
//
// The data are labelled TSV or JSONL files (data/classify_data.h), tokenised once with the
// model's WordPiece vocabulary, shuffled each epoch from the run's seed and packed (unpadded)
// into micro-batches of B examples. The model starts from a BERT checkpoint (--init-from: a
// pretraining body gets a new pooler-side head, load_bert_body), from a fine-tuned one, or from
// the preset's random initialisation (the baseline that prices the pretraining).
//
// Validation runs the whole validation file: loss, accuracy, macro-F1 (over the classes present
// in the labels or the predictions, as scikit-learn's f1_score(average="macro")) and the
// confusion matrix (rows: true class, columns: predicted), written to the run's confusion.json.
// The weights with the best validation macro-F1 so far are kept in run_dir/best (a weights-only
// checkpoint eval and --init-from read) and named in the log.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/classify_data.h"
#include "train/train_task.h"

namespace mptrain {

struct ClassifyTrainOptions {
  ClassifyColumns columns;
  bool header = true;       // TSV files start with a line naming the columns
  std::string labels_path;  // one label name a line, by class id (prepare --task topics' labels.txt)
  int num_labels = 0;       // without names: integer labels in [0, num_labels)
  std::string vocab_path;   // WordPiece vocab.txt; default: the --init-from checkpoint's
  bool lower_case = true;   // with --vocab: an uncased vocabulary
};

std::unique_ptr<TrainTask> make_classify_task(const TaskSpec& spec, const ClassifyTrainOptions& options);

}  // namespace mptrain
