// BERT evaluation on held-out instances: MLM loss and accuracy over the masked positions and
// NSP loss and accuracy, summed over batches (the loader's dynamic masking, from its seed), and
// what the most-frequent-label baseline would score on the same positions.
#pragma once
#include <cstdint>
#include <string>

#include "data/bert_loader.h"
#include "model/bert.h"

namespace mptrain {

class Communicator;

struct BertEvalResult {
  int64_t batches = 0;
  int64_t mlm_count = 0, mlm_correct = 0;  // masked positions; arg-max equal to the label
  int64_t nsp_count = 0, nsp_correct = 0;
  double mlm_loss = 0.0;   // mean over masked positions
  double nsp_loss = 0.0;   // mean over sequences
  double mlm_baseline = 0.0;  // accuracy of always predicting the most frequent label
  double nsp_baseline = 0.0;  // accuracy of always predicting the more frequent NSP label
  double mlm_accuracy() const { return mlm_count ? static_cast<double>(mlm_correct) / mlm_count : 0.0; }
  double nsp_accuracy() const { return nsp_count ? static_cast<double>(nsp_correct) / nsp_count : 0.0; }
};

// Runs `batches` batches from the start of the loader (reset first; 0 = one epoch). With a
// communicator, ranks take turns over the same batches and the sums are combined, so the
// result does not depend on the world size. The model must be planned for the loader's B×T.
BertEvalResult evaluate_bert(Bert& model, BertLoader& loader, int64_t batches, Communicator* comm = nullptr);

// `mptrain eval` for a BERT checkpoint (resolved dir): MLM and NSP loss and accuracy on an
// instance file (T = its max_seq_len), with the baselines, printed to stdout. batches 0 = one pass.
void run_bert_eval(const std::string& ckpt_dir, const std::string& data, int batch, int64_t batches,
                   int max_predictions = 20);

}  // namespace mptrain
