// A Llama training checkpoint (issue 40): GPT-2's layout (train/checkpoint.h) and run state with
// Llama's tensors under Hugging Face LlamaForCausalLM's names and layouts, so the folder reads as
// a Hugging Face model:
//   model.safetensors   every parameter ([V, C] embeddings and head: the real vocabulary's rows);
//                       metadata format "pt", mptrain_model "llama", mptrain_config (config.json's
//                       fields plus padded_vocab_size and init_std)
//   config.json         hf_llama_config's LlamaConfig
//   optimizer.safetensors, state.json, checksums.json as GPT-2's.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "model/llama.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"

namespace mptrain {

// A training checkpoint, with extra files (name, contents) beside it: a fine-tuned import's
// tokenizer files (data/gpt2_tokenizer.h's tokenizer_files).
void save_llama_checkpoint(const std::string& run_dir, const Llama& model, const Optimizer& optimizer,
                           const TrainState& state, int keep_last, const ExtraFiles& extra_files = {});
// A weights-only Llama checkpoint in the existing folder dir (a Hugging Face import), with the
// folder's tokenizer files beside it.
void save_llama_weights_checkpoint(const std::string& dir, const LlamaConfig& config, const ParamTable& table,
                                   const float* params, const TrainState& state,
                                   const ExtraFiles& extra_files = {});
// Whether ckpt_dir's model.safetensors says it holds a Llama (mptrain_model = llama).
bool is_llama_checkpoint(const std::string& ckpt_dir);
// The config a Llama checkpoint was written with; Error naming the file when it is not one or
// its config does not fit its tensors.
LlamaConfig load_llama_checkpoint_config(const std::string& ckpt_dir);
// Loads the parameters into model (whose config must match); padded vocabulary rows are zeroed.
void load_llama_checkpoint_model(const std::string& ckpt_dir, Llama& model);

}  // namespace mptrain
