// Llama as Hugging Face stores it (LlamaForCausalLM): config.json's LlamaConfig fields to and
// from a LlamaConfig. The parameter names of model/llama_config.h are the hub's own, and its
// weights keep nn.Linear's [out, in] layout, so weights copy as they are. Here in train/, beside
// GPT-2's and BERT's config.json writers (train/checkpoint.h, train/bert_checkpoint.h), which the
// checkpoints use.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "model/llama_config.h"

namespace mptrain {

// A LlamaConfig from config.json (hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, vocab_size, max_position_embeddings, rms_norm_eps,
// rope_theta, tie_word_embeddings, initializer_range), the vocabulary padded to a multiple of
// vocab_multiple. What this Llama does not implement (another activation, rope_scaling, biases,
// a head_dim other than hidden_size / num_attention_heads, pretraining_tp, Qwen3's sliding window)
// is an error saying so.
// `what` names the file in messages.
LlamaConfig llama_config_from_hf(const nlohmann::json& cfg, const std::string& what, int vocab_multiple);

// config.json for a LlamaConfig, in the one Hugging Face form that computes it:
// - LlamaForCausalLM (model_type "llama", SwiGLU as "silu");
// - with QK-norm, Qwen3ForCausalLM (model_type "qwen3": q_norm / k_norm [head_dim] over each head
//   before the rotation, the same names);
// - with the ReLU² MLP no transformers class computes it (LlamaMLP is gated: a "relu2" hidden_act
//   there would look for gate_proj and initialise it at random), so model_type "mptrain_llama",
//   which transformers refuses to load rather than load wrongly; mptrain reads it back.
// llama_config_from_hf reads all three.
nlohmann::json hf_llama_config(const LlamaConfig& config);

// Whether transformers can load hf_llama_config(config) (not the ReLU² form).
bool has_hf_form(const LlamaConfig& config);

}  // namespace mptrain
