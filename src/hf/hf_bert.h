// BERT as Hugging Face stores it (BertForPreTraining): the name map of io/hf_folder.h, the
// translation of config.json's BertConfig fields, the WordPiece tokenizer files (vocab.txt,
// tokenizer_config.json), and the weights-only BERT checkpoint an import writes. The other
// direction, BertConfig → BertConfig JSON, is hf_bert_config() in train/bert_checkpoint.h
// (BERT checkpoints carry the same config.json).
//
// mptrain's BERT parameter names ARE BertForPreTraining's names ("bert." prefix included) and
// its weights keep nn.Linear's [out, in] layout, so import and export copy tensors; the map
// handles the rest: files without the "bert." prefix, TF-converted LayerNorm "gamma"/"beta",
// the position_ids / token_type_ids buffers, and the decoder tied to the word embeddings
// (cls.predictions.decoder.weight / .bias, checked equal to the embeddings / cls.predictions.bias
// when present, read in their place when only the decoder's name is there).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/param_table.h"
#include "io/hf_folder.h"
#include "model/bert_config.h"

namespace mptrain {

// The vocabulary multiple a BERT import pads to unless told otherwise: train --model bert's
// (bert_preset pads V to a multiple of 64).
inline constexpr int kBertVocabMultiple = 64;

const HfNameMap& bert_hf_name_map();

// A BertConfig from config.json's fields (architectures, when present, must name a Bert* class;
// the file's tensors must still be BertForPreTraining's): vocab_size, hidden_size, num_hidden_layers,
// num_attention_heads, intermediate_size (required); max_position_embeddings (512),
// type_vocab_size (2), layer_norm_eps (1e-12), initializer_range (0.02), pad_token_id (0)
// (Hugging Face's defaults when absent). Settings this BERT does not implement (another
// hidden_act than the erf "gelu", relative position embeddings, a decoder, cross-attention,
// untied word embeddings) are errors that say so. `what` names the file in messages.
BertConfig bert_config_from_hf(const nlohmann::json& cfg, const std::string& what, int vocab_multiple);

// The WordPiece vocabulary of an import: vocab.txt text and its casing.
struct HfBertVocab {
  std::string text;        // vocab.txt as stored (empty: none found)
  std::string source;      // the file it came from
  int size = 0;            // tokens
  bool lower_case = true;  // tokenizer_config.json's do_lower_case (BertTokenizer's default: true)
};

// `vocab_file` when given, else hf_dir/vocab.txt when present, else an empty result (the
// weights still import; fill-mask then needs --vocab). do_lower_case comes from
// hf_dir/tokenizer_config.json when present. The vocabulary must parse as WordPiece's
// (special tokens present) and have at most vocab_size tokens; otherwise Error.
HfBertVocab read_hf_bert_vocab(const std::string& hf_dir, const std::string& vocab_file, int vocab_size);

// Writes a weights-only BERT checkpoint into the existing directory dir, in the format of
// train/bert_checkpoint.h (model.safetensors with its mptrain metadata, config.json,
// state.json at step 0, vocab.txt + tokenizer_config.json when vocab.text is set, checksums.json)
// and without optimizer.safetensors: load_bert_checkpoint_*, eval, fill-mask and
// train --init-from read it (tested in tests/convert); `imported_from` goes into state.json's options.
// A classifier's labels (`labels`: labels.txt and config.json's id2label).
void save_bert_weights_checkpoint(const std::string& dir, const BertConfig& config, const ParamTable& table,
                                  const float* params, const HfBertVocab& vocab, const std::string& imported_from,
                                  const std::vector<std::string>& labels = {});
// A classifier's label names by class id from config.json's id2label (transformers' LABEL_i
// where it names none).
std::vector<std::string> hf_id2label(const nlohmann::json& cfg, int num_labels, const std::string& what);

}  // namespace mptrain
