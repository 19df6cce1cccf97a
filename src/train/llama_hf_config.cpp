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
  MPT_CHECK(type == "llama" || type == "qwen3" || type == "mptrain_llama",
            what + ": model_type '" + type + "' is not Llama (llama, qwen3 or mptrain_llama)");
  const bool qwen3 = type == "qwen3";
  const auto llama_class = [](const std::string& a) {
    return a == "LlamaForCausalLM" || a == "LlamaModel" || a == "MptrainLlamaForCausalLM";
  };
  const auto qwen3_class = [](const std::string& a) { return a == "Qwen3ForCausalLM" || a == "Qwen3Model"; };
  if (qwen3)
    hf_check_architectures(cfg, qwen3_class, what, "Qwen3ForCausalLM (or Qwen3Model)");
  else
    hf_check_architectures(cfg, llama_class, what, "LlamaForCausalLM (or LlamaModel)");
  LlamaConfig c;
  c.qk_norm = qwen3 || (type == "mptrain_llama" && hf_config_bool(cfg, "qk_norm", false, what));
  if (qwen3) {
    require_default(cfg, "use_sliding_window", false, what, "attention is causal over the whole sequence");
    if (const auto lt = cfg.find("layer_types"); lt != cfg.end() && !lt->is_null())
      for (const auto& t : *lt)
        MPT_CHECK(t == "full_attention", what + ": layer_types holds " + t.dump() +
                                             ", not supported (every layer is full attention)");
  }
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
  if (type == "mptrain_llama" && act == "relu2")
    c.mlp = LlamaMlp::Relu2;  // the un-gated ReLU² MLP (hf_llama_config)
  else
    MPT_CHECK(act == "silu", what + ": hidden_act '" + act + "' is not supported (the MLP is SwiGLU: silu" +
                                 (type == "mptrain_llama" ? ", or relu2" : "") + ")");
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

bool has_hf_form(const LlamaConfig& c) { return c.mlp == LlamaMlp::SwiGlu; }

nlohmann::json hf_llama_config(const LlamaConfig& c) {
  validate(c);
  const bool relu2 = c.mlp == LlamaMlp::Relu2;
  nlohmann::json j = {{"architectures",
                       {relu2       ? "MptrainLlamaForCausalLM"
                        : c.qk_norm ? "Qwen3ForCausalLM"
                                    : "LlamaForCausalLM"}},
                      {"model_type", relu2       ? "mptrain_llama"
                                     : c.qk_norm ? "qwen3"
                                                 : "llama"},
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
                      {"hidden_act", relu2 ? "relu2" : "silu"},
                      {"attention_bias", false},
                      {"mlp_bias", false},
                      {"initializer_range", c.init_std},
                      {"tie_word_embeddings", c.tie_embeddings},
                      {"torch_dtype", "float32"}};
  if (relu2) j["qk_norm"] = c.qk_norm;
  if (c.qk_norm && !relu2) {  // Qwen3's own fields, set to what this model computes
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = c.n_layer;
  }
  return j;
}

}  // namespace mptrain
