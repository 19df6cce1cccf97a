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
  double mlm_loss = 0.0;      // mean over masked positions
  double nsp_loss = 0.0;      // mean over sequences
  double mlm_baseline = 0.0;  // accuracy of always predicting the most frequent label
  double nsp_baseline = 0.0;  // accuracy of always predicting the more frequent NSP label
  double mlm_accuracy() const { return mlm_count ? static_cast<double>(mlm_correct) / mlm_count : 0.0; }
  double nsp_accuracy() const { return nsp_count ? static_cast<double>(nsp_correct) / nsp_count : 0.0; }
};

// A loader's batch as the model reads it: packed when the batch is unpadded (BertBatch's
// cu_seqlens), and NSP labels only for a model with the NSP head (BertConfig::nsp: an MLM-only
// model trains and evaluates without them).
BertInputs bert_inputs(const BertBatch& batch, const BertConfig& config);

// Runs `batches` batches from the start of the loader (reset first; 0 = one epoch). With a
// communicator, ranks take turns over the same batches and the sums are combined, so the
// result does not depend on the world size. The model must be planned for the loader's B×T.
BertEvalResult evaluate_bert(Bert& model, BertLoader& loader, int64_t batches, Communicator* comm = nullptr);

}  // namespace mptrain
