// A BERT classifier's predictions and scores (eval/classify_eval.h).
#include "eval/classify_eval.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mptrain {

ClassifyBatch pack_examples(const std::vector<const ClassifyExample*>& examples) {
  ClassifyBatch p;
  p.cu.push_back(0);
  for (const ClassifyExample* e : examples) {
    p.ids.insert(p.ids.end(), e->ids.begin(), e->ids.end());
    p.types.insert(p.types.end(), e->types.begin(), e->types.end());
    p.cu.push_back(static_cast<int>(p.ids.size()));
    p.labels.push_back(e->label);
    p.labelled = p.labelled && e->label >= 0;
  }
  return p;
}

ClassifyScores classify_scores(const std::vector<int>& labels, const std::vector<int>& predicted,
                               int classes) {
  ClassifyScores s;
  s.confusion.assign(static_cast<size_t>(classes), std::vector<int64_t>(static_cast<size_t>(classes), 0));
  int64_t right = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    ++s.confusion[static_cast<size_t>(labels[i])][static_cast<size_t>(predicted[i])];
    right += labels[i] == predicted[i];
  }
  s.accuracy = labels.empty() ? 0.0 : static_cast<double>(right) / static_cast<double>(labels.size());
  double sum = 0.0;
  int present = 0;
  for (int c = 0; c < classes; ++c) {
    int64_t tp = s.confusion[c][c], fn = 0, fp = 0;
    for (int o = 0; o < classes; ++o)
      if (o != c) fn += s.confusion[c][o], fp += s.confusion[o][c];
    if (tp + fn + fp == 0) continue;  // in neither the labels nor the predictions
    sum += 2.0 * static_cast<double>(tp) / static_cast<double>(2 * tp + fp + fn);
    ++present;
  }
  s.macro_f1 = present ? sum / present : 0.0;
  return s;
}

ClassifyEval evaluate_classifier(Bert& model, const std::vector<ClassifyExample>& examples, int B, int T) {
  const int K = model.config().num_labels;
  MPT_CHECK(K > 0, "the model is not a classifier (its checkpoint has no num_labels)");
  ClassifyEval r;
  std::vector<int> labels, scored;  // the labelled examples' labels and predictions
  double loss = 0.0;
  int64_t labelled = 0;
  for (size_t at = 0; at < examples.size(); at += static_cast<size_t>(B)) {
    std::vector<const ClassifyExample*> batch;
    for (size_t i = at; i < std::min(examples.size(), at + static_cast<size_t>(B)); ++i)
      batch.push_back(&examples[i]);
    const ClassifyBatch p = pack_examples(batch);
    const BertStats st = model.forward(p.inputs(), p.size(), T);
    if (p.labelled) {
      loss += static_cast<double>(st.nsp_loss) * p.size();
      labelled += p.size();
    }
    const float* logits = model.nsp_logits();
    for (int b = 0; b < p.size(); ++b) {
      const float* row = logits + static_cast<size_t>(b) * K;
      const int best = static_cast<int>(std::max_element(row, row + K) - row);
      double z = 0.0;
      for (int k = 0; k < K; ++k) z += std::exp(static_cast<double>(row[k]) - row[best]);
      r.predicted.push_back(best);
      r.probability.push_back(static_cast<float>(1.0 / z));
      if (batch[static_cast<size_t>(b)]->label >= 0) {
        labels.push_back(batch[static_cast<size_t>(b)]->label);
        scored.push_back(best);
      }
    }
  }
  if (labelled > 0) r.loss = loss / static_cast<double>(labelled);
  r.scores = classify_scores(labels, scored, K);
  return r;
}

}  // namespace mptrain
