// GPT-2's Hugging Face names and config fields.
#include "hf/hf_gpt2.h"

#include <cmath>

#include "core/error.h"

namespace mptrain {

const HfNameMap& gpt2_hf_name_map() {
  static const HfNameMap map = {
      "GPT2LMHeadModel",
      "transformer.",  // GPT2LMHeadModel.save_pretrained prefixes the body; the hub's files do not
      {},
      {"h.#.attn.bias", "h.#.attn.masked_bias"},  // causal-mask buffers of older files
      {{"lm_head.weight", "wte.weight"}},
  };
  return map;
}

Gpt2Config gpt2_config_from_hf(const nlohmann::json& cfg, const std::string& what, int vocab_multiple) {
  const std::string type = hf_config_string(cfg, "model_type", "gpt2", what);
  MPT_CHECK(type == "gpt2", what + ": model_type '" + type + "' is not GPT-2");
  hf_check_architectures(
      cfg, [](const std::string& a) { return a == "GPT2LMHeadModel" || a == "GPT2Model"; }, what,
      "GPT2LMHeadModel (or GPT2Model)");

  Gpt2Config c;
  c.n_layer = hf_config_int(cfg, "n_layer", what);
  c.n_head = hf_config_int(cfg, "n_head", what);
  c.n_embd = hf_config_int(cfg, "n_embd", what);
  c.vocab_size = hf_config_int(cfg, "vocab_size", what);
  c.block_size = hf_config_int_any(cfg, {"n_positions", "n_ctx"}, what);  // wpe rows; n_ctx is the old name
  c.ln_eps = static_cast<float>(hf_config_number(cfg, "layer_norm_epsilon", 1e-5, what));
  c.init_std = static_cast<float>(hf_config_number(cfg, "initializer_range", 0.02, what));
  // Finite too: 1e300 in the file becomes an infinite float, and every layer norm a NaN.
  MPT_CHECK(std::isfinite(c.ln_eps) && c.ln_eps > 0.0f, what + ": layer_norm_epsilon must be positive and finite");
  MPT_CHECK(std::isfinite(c.init_std), what + ": initializer_range must be finite");

  const std::string act = hf_config_string(cfg, "activation_function", "gelu_new", what);
  MPT_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh",
            what + ": activation_function '" + act +
                "' is not supported (mptrain's GPT-2 uses gelu_new, the tanh form)");
  if (auto it = cfg.find("n_inner"); it != cfg.end() && !it->is_null())
    MPT_CHECK(it->is_number_integer() && it->get<int64_t>() == 4 * int64_t{c.n_embd},
              what + ": n_inner " + it->dump() +
                  " is not supported (the MLP is 4·n_embd = " + std::to_string(4 * c.n_embd) + " wide)");
  MPT_CHECK(
      hf_config_bool(cfg, "scale_attn_weights", true, what),
      what +
          ": scale_attn_weights false is not supported (attention scores are scaled by 1/sqrt(head size))");
  MPT_CHECK(!hf_config_bool(cfg, "scale_attn_by_inverse_layer_idx", false, what),
            what + ": scale_attn_by_inverse_layer_idx is not supported");
  MPT_CHECK(hf_config_bool(cfg, "tie_word_embeddings", true, what),
            what + ": tie_word_embeddings false is not supported (the LM head is tied to wte)");
  MPT_CHECK(!hf_config_bool(cfg, "add_cross_attention", false, what),
            what + ": add_cross_attention is not supported");

  c.padded_vocab_size = pad_vocab(c.vocab_size, vocab_multiple);
  return hf_validated(c, what);
}

}  // namespace mptrain
