// BERT pretraining batches from an instance file (data/bert_instances.h), masked at
// load time (dynamic masking: a fresh mask for every epoch, seeded and resumable).
//
// Batch layout (row-major int32, b in [0,B), t in [0,T); every row one instance):
//   input_ids[B*T]       [CLS] A [SEP] B [SEP], masked (below), then [PAD] up to T
//   token_type_ids[B*T]  0 on [CLS], A and the first [SEP]; 1 on B and the last [SEP]; 0 on padding
//   attention_mask[B*T]  1 on real tokens, 0 on padding (the key padding mask; padding is
//                        always at the end of a row: positions t >= lengths[b])
//   mlm_labels[B*T]      the original id at masked positions, -1 everywhere else
//                        (mptrain's ignore index is -1; Hugging Face writes -100 for the
//                        same thing: only the sign matters, it never indexes the vocab)
//   nsp_labels[B]        0 = IsNext (B is A's real continuation), 1 = NotNext (B random),
//                        Hugging Face's next_sentence_label convention
//   lengths[B]           real tokens per row (<= T)
//   num_masked           number of mlm_labels != -1 in the batch (the MLM loss divisor)
// Padding ([PAD], type 0, mask 0, label -1) is never masked and never labelled; nor are
// [CLS] and [SEP].
//
// Masking (google-research/bert create_pretraining_data.py, applied per epoch):
//   candidates = the instance's non-special positions (everything but [CLS]/[SEP]);
//   n = min(max_predictions, max(1, round(0.15 * candidates)));  n positions drawn
//   uniformly without replacement; each becomes [MASK] with p 0.8, a random ordinary
//   token (uniform over the vocabulary's non-"[...]" tokens) with p 0.1, and stays
//   unchanged with p 0.1. The original counts len(tokens) including [CLS]/[SEP] in n;
//   mptrain counts the maskable tokens so that 15% of them are predicted.
//   All draws come from a counter-based RNG keyed by (seed, epoch, instance index):
//   the same mask for an instance whatever the batch size, world size or restart.
//
// Order: each epoch walks a permutation of the instances (keyed by (seed, epoch);
// identity with shuffle = false). With `world` ranks, the global batch is the B*world
// instances at the current position and rank r takes the r-th B of them, so the global
// batch is the same for every world size. An epoch ends when fewer than B*world
// instances remain (those are skipped, as the GPT-2 loader skips a partial window).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/bert_instances.h"

namespace mptrain {

inline constexpr int kMlmIgnoreLabel = -1;

struct BertBatch {
  int B = 0, T = 0;
  std::vector<int> input_ids, token_type_ids, attention_mask, mlm_labels;  // [B*T]
  std::vector<int> nsp_labels, lengths;                                    // [B]
  int64_t num_masked = 0;
  // Unpadded (unpad below): [B+1] offsets of the rows; input_ids, token_type_ids and mlm_labels
  // then hold the real tokens only, back to back, and attention_mask is empty. Empty: padded.
  std::vector<int> cu_seqlens;
};

// Drops a padded batch's padding in place (model/bert.h's packed layout, BertInputs::cu_seqlens):
// row b's lengths[b] real tokens, then row b+1's, ...; same tokens, labels, masks and order.
void unpad(BertBatch& batch);

struct BertMaskingOptions {
  double mask_prob = 0.15;         // fraction of maskable tokens predicted
  int max_predictions = 20;        // per instance (google-research/bert: 20 at seq 128, 80 at 512)
  double mask_token_prob = 0.8;    // of the predicted: replaced by [MASK]
  double random_token_prob = 0.1;  // of the predicted: replaced by a random ordinary token
                                   // (the rest, 0.1, stay unchanged)
  uint64_t seed = 1234;
  bool shuffle = true;  // a new instance order every epoch
};

// Where the next global batch starts: the index into the epoch's order, and the epoch.
struct BertLoaderPosition {
  int64_t index = 0;
  int64_t epoch = 0;
};

// The masked tokens and labels of one instance (the function the loader calls per row;
// exposed for tests). input/labels have tokens.size() entries.
void bert_mask_instance(std::span<const uint16_t> tokens, const WordpieceVocab& vocab,
                        const std::vector<int>& random_pool, const BertMaskingOptions& opt, uint64_t epoch,
                        uint64_t instance, int* input, int* labels);

class BertLoader {
 public:
  // path: an instance file. T: the padded sequence length (the model's positions, or
  // fewer); an instance file with max_seq_len > T is an error. vocab_size: the model's
  // (unpadded) vocabulary; a file whose vocabulary is larger is an error. The file must
  // hold at least B*world instances.
  BertLoader(const std::string& path, int B, int T, int vocab_size, const BertMaskingOptions& opt = {},
             int rank = 0, int world = 1);

  // Fills `batch` (resized to B, T) with the next batch and advances.
  void next(BertBatch& batch);

  BertLoaderPosition position() const { return pos_; }
  void set_position(const BertLoaderPosition& pos);
  void reset() { set_position({}); }

  const BertInstanceFile& file() const { return file_; }
  const BertMaskingOptions& options() const { return opt_; }
  size_t num_instances() const { return file_.size(); }
  size_t batches_per_epoch() const { return file_.size() / (static_cast<size_t>(B_) * world_); }
  int B() const { return B_; }
  int T() const { return T_; }

 private:
  void build_order(int64_t epoch);
  BertInstanceFile file_;
  int B_, T_, rank_, world_;
  BertMaskingOptions opt_;
  std::vector<int> random_pool_;  // ids a masked token may be replaced with
  std::vector<uint32_t> order_;   // the epoch's instance order
  int64_t order_epoch_ = -1;
  BertLoaderPosition pos_;
};

}  // namespace mptrain
