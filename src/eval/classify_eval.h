// A BERT classifier (BertForSequenceClassification, model/bert.h with num_labels) over labelled
// or unlabelled examples (data/classify_data.h): the batches it reads, its predictions with
// their probabilities, the mean loss, and the scores training's validation, `eval` and
// `predict` report.
#pragma once
#include <cstdint>
#include <vector>

#include "data/classify_data.h"
#include "model/bert.h"

namespace mptrain {

// Examples as the model reads them: packed (unpadded) in one micro-batch, their class ids as the
// labels of the pooled row's head (-1 labels, unlabelled examples, leave the labels out).
struct ClassifyBatch {
  std::vector<int> ids, types, cu, labels;
  bool labelled = true;
  BertInputs inputs() const {
    return {ids.data(), types.data(), nullptr, nullptr, labelled ? labels.data() : nullptr, cu.data()};
  }
  int size() const { return static_cast<int>(cu.size()) - 1; }
};
ClassifyBatch pack_examples(const std::vector<const ClassifyExample*>& examples);

// The validation figures of predictions against labels over `classes` classes: accuracy,
// macro-F1 over the classes present in the labels or the predictions (scikit-learn's
// f1_score(average="macro")), and the confusion matrix [true][predicted].
struct ClassifyScores {
  double accuracy = 0.0, macro_f1 = 0.0;
  std::vector<std::vector<int64_t>> confusion;
};
ClassifyScores classify_scores(const std::vector<int>& labels, const std::vector<int>& predicted,
                               int classes);

struct ClassifyEval {
  std::vector<int> predicted;      // arg-max class per example, in order
  std::vector<float> probability;  // its softmax probability
  double loss = 0.0;               // mean cross-entropy (labelled examples only)
  ClassifyScores scores;           // against the labels (labelled examples only)
};
// Every example in order, in micro-batches of B (the model planned for B×T, every example at
// most T tokens).
ClassifyEval evaluate_classifier(Bert& model, const std::vector<ClassifyExample>& examples, int B, int T);

}  // namespace mptrain
