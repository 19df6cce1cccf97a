// BERT hyper-parameters (Hugging Face's BertConfig fields) and the named presets.
#pragma once
#include <string>
#include <vector>

#include "model/recompute.h"

namespace mptrain {

struct BertConfig {
  int vocab_size = 30522;         // V, the real vocabulary
  int padded_vocab_size = 30528;  // Vp: V rounded up to a multiple of 64 (core/glossary.h)
  int max_position = 512;         // position embedding rows: the longest sequence
  int type_vocab_size = 2;        // token types (segments A and B)
  int n_layer = 12;
  int n_head = 12;
  int hidden = 768;         // C
  int intermediate = 3072;  // FFN width (4·C in every standard preset)
  int pad_token_id = 0;     // [PAD]: its word embedding row takes no gradient (padding_idx)
  float ln_eps = 1e-12f;
  float init_std = 0.02f;
  // BertForPreTraining's pooler and next-sentence head. false: MLM-only pretraining, the model
  // Hugging Face's BertForMaskedLM (no pooler, no NSP head), as RoBERTa, MosaicBERT, ModernBERT.
  bool nsp = true;
  // Hugging Face's BertForSequenceClassification when positive: the pooler and a classifier
  // [num_labels, C] on the [CLS] row (`classifier.*`), no pretraining heads (nsp must be false).
  int num_labels = 0;
  // Training-time, not saved with the model: what the backward recomputes instead of keeping
  // (model/recompute.h: gelu, mlp).
  RecomputeSet recompute;

  bool mlm() const { return num_labels == 0; }           // the masked-LM head
  bool pooled() const { return nsp || num_labels > 0; }  // the pooler and a head on it
  // The classes of the head on the pooled row: NSP's two, or the classifier's.
  int seq_classes() const { return num_labels > 0 ? num_labels : 2; }
};

// Presets: bert-base (110M with V = 30522), bert-large (335M), and small ones for CPU work
// from Google's "Well-Read Students" release: bert-tiny (L2 H128), bert-mini (L4 H256),
// bert-small (L4 H512), bert-medium (L8 H512); heads = H/64, FFN = 4·H, 512 positions.
// vocab_size sets V (the WordPiece vocabulary's size), padded to vocab_multiple.
// Throws Error listing the known names for an unknown one.
BertConfig bert_preset(const std::string& name, int vocab_size = 30522, int vocab_multiple = 64);
std::vector<std::string> bert_preset_names();

// Checks the invariants (heads divide the width, positive sizes, Vp >= V); throws Error.
void validate(const BertConfig& config);

}  // namespace mptrain
