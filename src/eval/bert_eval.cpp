// BERT evaluation: MLM and NSP accuracy on held-out instances.
#include "eval/bert_eval.h"

#include <algorithm>
#include <map>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"

namespace mptrain {

BertInputs bert_inputs(const BertBatch& b, const BertConfig& config) {
  const bool packed = !b.cu_seqlens.empty();
  return {b.input_ids.data(),
          b.token_type_ids.data(),
          packed ? nullptr : b.attention_mask.data(),
          b.mlm_labels.data(),
          config.nsp ? b.nsp_labels.data() : nullptr,
          packed ? b.cu_seqlens.data() : nullptr};
}

BertEvalResult evaluate_bert(Bert& model, BertLoader& loader, int64_t batches, Communicator* comm) {
  if (batches <= 0) batches = static_cast<int64_t>(loader.batches_per_epoch());
  loader.reset();
  BertEvalResult r;
  double mlm_sum = 0.0, nsp_sum = 0.0;
  std::map<int, int64_t> label_counts;
  int64_t nsp_ones = 0;
  BertBatch batch;
  const int world = comm ? comm->world_size() : 1, rank = comm ? comm->rank() : 0;
  for (int64_t i = 0; i < batches; ++i) {
    loader.next(batch);
    if (i % world != rank) continue;
    const BertStats st = model.forward(bert_inputs(batch, model.config()), batch.B, batch.T);
    r.mlm_count += st.mlm_count;
    r.mlm_correct += st.mlm_correct;
    r.nsp_count += st.nsp_count;
    r.nsp_correct += st.nsp_correct;
    mlm_sum += static_cast<double>(st.mlm_loss) * st.mlm_count;
    nsp_sum += static_cast<double>(st.nsp_loss) * st.nsp_count;
    for (int label : batch.mlm_labels)
      if (label != kMlmIgnoreLabel) ++label_counts[label];
    if (st.nsp_count > 0)
      for (int label : batch.nsp_labels) nsp_ones += label;
  }
  int64_t top = 0;
  for (const auto& [label, n] : label_counts) top = std::max(top, n);
  if (comm && world > 1) {
    // The most frequent label of all ranks' batches (the baseline of one process): per-label
    // counts summed over ranks, as a dense vector over the vocabulary (doubles count exactly).
    std::vector<double> counts(static_cast<size_t>(model.config().padded_vocab_size), 0.0);
    for (const auto& [label, n] : label_counts) {
      MPT_CHECK(label >= 0 && static_cast<size_t>(label) < counts.size(),
                "bert eval: MLM label out of range");
      counts[static_cast<size_t>(label)] = static_cast<double>(n);
    }
    comm->all_reduce(counts.data(), counts.size(), ReduceOp::Sum);
    top = static_cast<int64_t>(*std::max_element(counts.begin(), counts.end()));
    r.mlm_count = static_cast<int64_t>(comm->sum(static_cast<double>(r.mlm_count)));
    r.mlm_correct = static_cast<int64_t>(comm->sum(static_cast<double>(r.mlm_correct)));
    r.nsp_count = static_cast<int64_t>(comm->sum(static_cast<double>(r.nsp_count)));
    r.nsp_correct = static_cast<int64_t>(comm->sum(static_cast<double>(r.nsp_correct)));
    mlm_sum = comm->sum(mlm_sum);
    nsp_sum = comm->sum(nsp_sum);
    nsp_ones = static_cast<int64_t>(comm->sum(static_cast<double>(nsp_ones)));
  }
  r.batches = batches;
  r.mlm_loss = r.mlm_count ? mlm_sum / r.mlm_count : 0.0;
  r.nsp_loss = r.nsp_count ? nsp_sum / r.nsp_count : 0.0;
  r.mlm_baseline = r.mlm_count ? static_cast<double>(top) / r.mlm_count : 0.0;
  r.nsp_baseline =
      r.nsp_count ? static_cast<double>(std::max(nsp_ones, r.nsp_count - nsp_ones)) / r.nsp_count : 0.0;
  return r;
}

}  // namespace mptrain
