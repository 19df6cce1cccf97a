// Llama's config.json fields (train/llama_hf_config.h).
#include "train/llama_hf_config.h"

#include <cmath>

#include "core/error.h"
#include "io/hf_folder.h"
#include "model/gpt2_config.h"  // pad_vocab

namespace mptrain {

namespace {
// A setting that must be absent or have the value this Llama implements.
void require_default(const nlohmann::json& cfg, const char* key, const nlohmann::json& implemented,
                     const std::string& what, const std::string& why) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null() || *it == implemented) return;
  throw Error(what + ": " + key + " " + it->dump() + " is not supported (" + why + ")");
}
}  // namespace

LlamaConfig llama_config_from_hf(const nlohmann::json& cfg, const std::string& what, int vocab_multiple) {
  const std::string type = hf_config_string(cfg, "model_type", "llama", what);
  MPT_CHECK(type == "llama", what + ": model_type '" + type + "' is not Llama");
  hf_check_architectures(
      cfg, [](const std::string& a) { return a == "LlamaForCausalLM" || a == "LlamaModel"; }, what,
      "LlamaForCausalLM (or LlamaModel)");
  LlamaConfig c;
  c.n_embd = hf_config_int(cfg, "hidden_size", what);
  c.intermediate = hf_config_int(cfg, "intermediate_size", what);
  c.n_layer = hf_config_int(cfg, "num_hidden_layers", what);
  c.n_head = hf_config_int(cfg, "num_attention_heads", what);
  c.n_kv_head = cfg.contains("num_key_value_heads") && !cfg["num_key_value_heads"].is_null()
                    ? hf_config_int(cfg, "num_key_value_heads", what)
                    : c.n_head;  // transformers' default: multi-head attention
  c.vocab_size = hf_config_int(cfg, "vocab_size", what);
  c.block_size = hf_config_int(cfg, "max_position_embeddings", what);
  c.rms_eps = static_cast<float>(hf_config_number(cfg, "rms_norm_eps", 1e-6, what));
  c.rope_theta = static_cast<float>(hf_config_number(cfg, "rope_theta", 10000.0, what));
  c.init_std = static_cast<float>(hf_config_number(cfg, "initializer_range", 0.02, what));
  c.tie_embeddings = hf_config_bool(cfg, "tie_word_embeddings", false, what);
  MPT_CHECK(std::isfinite(c.init_std), what + ": initializer_range must be finite");

  const std::string act = hf_config_string(cfg, "hidden_act", "silu", what);
  MPT_CHECK(act == "silu", what + ": hidden_act '" + act + "' is not supported (the MLP is SwiGLU: silu)");
  require_default(cfg, "rope_scaling", nullptr, what, "rotary embeddings are unscaled");
  require_default(cfg, "attention_bias", false, what, "this Llama has no biases");
  require_default(cfg, "mlp_bias", false, what, "this Llama has no biases");
  require_default(cfg, "pretraining_tp", 1, what, "tensor-parallel pretraining slices are not emulated");
  if (c.n_head > 0 && c.n_embd % c.n_head == 0)
    require_default(cfg, "head_dim", c.n_embd / c.n_head, what,
                    "heads are hidden_size / num_attention_heads wide");

  c.padded_vocab_size = pad_vocab(c.vocab_size, vocab_multiple);
  return hf_validated(c, what);
}

nlohmann::json hf_llama_config(const LlamaConfig& c) {
  validate(c);
  MPT_CHECK(c.mlp == LlamaMlp::SwiGlu, "a ReLU² MLP has no LlamaForCausalLM form (its MLP is gated SwiGLU)");
  MPT_CHECK(!c.qk_norm, "QK-norm has no LlamaForCausalLM form");
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", c.n_embd},
          {"intermediate_size", c.intermediate},
          {"num_hidden_layers", c.n_layer},
          {"num_attention_heads", c.n_head},
          {"num_key_value_heads", c.n_kv_head},
          {"head_dim", c.head_size()},
          {"vocab_size", c.vocab_size},
          {"max_position_embeddings", c.block_size},
          {"rms_norm_eps", c.rms_eps},
          {"rope_theta", c.rope_theta},
          {"rope_scaling", nullptr},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"initializer_range", c.init_std},
          {"tie_word_embeddings", c.tie_embeddings},
          {"torch_dtype", "float32"}};
}

}  // namespace mptrain
