// What a BERT training checkpoint holds, written by train/checkpoint.h's save_training_checkpoint
// on the directory protocol of io/checkpoint_dir.h (atomic step_N dirs, `latest`, checksums):
//   model.safetensors      parameters under Hugging Face BertForPreTraining names and layouts
//                          (nn.Linear [out, in]; word embeddings and cls.predictions.bias with
//                          the real V rows); metadata: format "pt", mptrain_model "bert" and
//                          mptrain_config (BertConfig as JSON)
//   config.json            Hugging Face BertConfig fields, so the folder reads like a HF model
//   optimizer.safetensors  as GPT-2's (train/checkpoint.h): "<prefix>.<name>" per parameter
//   state.json             the run state of train/checkpoint.h (step, seed, precision, fp16 loss
//                          scaler, lr_scale, nan_rollbacks, options), "model": "bert" and the
//                          BERT loader's position (train_index, train_epoch)
//   vocab.txt, tokenizer_config.json   the WordPiece vocabulary and {"do_lower_case": ...}
// Loading goes through io/hf_folder's name map, so a BertForPreTraining file written by
// Hugging Face or converted from Google's TF checkpoints loads too: LayerNorm "gamma"/"beta"
// are read as "weight"/"bias", a stored cls.predictions.decoder.weight (.bias) must equal the
// word embeddings (cls.predictions.bias) it is tied to, bert.embeddings.position_ids is skipped.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/bert_loader.h"
#include "model/bert.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"

namespace mptrain {

// BERT's state: the run state (train/checkpoint.h: step, seed, precision, loss scaler,
// rollback fields, options) and where the next training instance starts.
struct BertTrainState : RunState {
  BertLoaderPosition train_pos;  // where the next training batch starts
  // The WordPiece vocabulary the ids index (vocab.txt text; from the instance file) and its
  // casing, written beside the weights as vocab.txt and tokenizer_config.json, so fill-mask
  // and eval need nothing but the checkpoint. Empty: not written. (Not read back into the state.)
  std::string vocab_text;
  bool lower_case = true;
  // A classifier's label names by class id, written as labels.txt and as config.json's id2label.
  std::vector<std::string> labels;
};

// Writes a complete checkpoint for state.step into run_dir, then keeps the newest keep_last (0 = all).
void save_bert_checkpoint(const std::string& run_dir, const Bert& model, const Optimizer& optimizer,
                          const BertTrainState& state, int keep_last);

// A weights-only checkpoint in dir (replaced whole): the model, config.json, state.json, the
// vocabulary and labels; no optimizer state (eval, --init-from and convert read it; --resume not).
void save_bert_weights(const std::string& dir, const Bert& model, const BertTrainState& state);
// The same from parameters on the host laid out by `table` (an import's).
void save_bert_weights(const std::string& dir, const BertConfig& config, const ParamTable& table,
                       const float* params, const BertTrainState& state);
// tokenizer_config.json as BertTokenizer reads it.
nlohmann::json bert_tokenizer_config(bool lower_case, int max_position);

// True when ckpt_dir's model.safetensors was written for a BERT model (metadata mptrain_model).
bool is_bert_checkpoint(const std::string& ckpt_dir);
// The config stored in a checkpoint directory (resolve a run dir first).
BertConfig load_bert_checkpoint_config(const std::string& ckpt_dir);
// Loads parameters into model (whose config must match); padded rows are zeroed.
void load_bert_checkpoint_model(const std::string& ckpt_dir, Bert& model);
// A classifier's start from a BERT body (a pretraining or another task's checkpoint): every
// tensor of the model the file holds is read, except a head on the pooled row (its classes are
// not this task's); the pooler and that head keep the model's own initialisation when the file
// lacks them (an MLM-only body has no pooler), as transformers' from_pretrained does. Returns the
// names left newly initialised; Error for any other tensor the file lacks.
std::vector<std::string> load_bert_body(const std::string& ckpt_dir, Bert& model);
// A checkpoint's labels.txt (one name a line, by class id); empty when it has none.
std::vector<std::string> bert_checkpoint_labels(const std::string& ckpt_dir);
// state.json of a BERT run (model "bert"); every field checked, one Error for a malformed file.
BertTrainState load_bert_checkpoint_state(const std::string& ckpt_dir);
// The parser behind it, on text already read (`what` names the source in errors).
BertTrainState parse_bert_checkpoint_state(const std::string& text, const std::string& what);
// ckpt_dir/vocab.txt's path and tokenizer_config.json's do_lower_case (true when absent).
// Throws Error when the checkpoint has no vocab.txt.
std::string bert_checkpoint_vocab(const std::string& ckpt_dir);
bool bert_checkpoint_lower_case(const std::string& ckpt_dir);

// The Hugging Face BertConfig JSON for a config, and the mptrain config JSON (both directions).
// Its architectures name the class that holds the model's heads: BertForPreTraining, or
// BertForMaskedLM for an MLM-only model (BertConfig::nsp false), BertForSequenceClassification
// for a classifier (BertConfig::num_labels).
const char* bert_hf_architecture(const BertConfig& config);
nlohmann::json hf_bert_config(const BertConfig& config);
// A classifier's adds id2label / label2id from `labels` (LABEL_i where a name is missing).
nlohmann::json hf_bert_config(const BertConfig& config, const std::vector<std::string>& labels);
nlohmann::json bert_config_json(const BertConfig& config);
BertConfig bert_config_from_json(const nlohmann::json& j, const std::string& what);

}  // namespace mptrain
