// The Llama family's config, presets and parameter table against Hugging Face's LlamaConfig:
// SmolLM-135M's config.json (as the hub ships it) gives its published 134,515,008 parameters,
// the table's names and layouts are LlamaForCausalLM's, config.json round-trips, and what this
// Llama does not implement is one clear error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "train/llama_hf_config.h"
#include "model/llama_config.h"

namespace mptrain {
namespace {

nlohmann::json smollm_135m() {
  return nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576,
    "initializer_range": 0.02, "intermediate_size": 1536, "max_position_embeddings": 2048,
    "model_type": "llama", "num_attention_heads": 9, "num_hidden_layers": 30,
    "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
    "rope_theta": 10000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.40.1", "use_cache": true, "vocab_size": 49152})");
}

// Parameters the table holds in checkpoint shapes (the real vocabulary's rows).
int64_t table_params(const ParamTable& t) {
  int64_t n = 0;
  for (const ParamSpec& s : t.specs()) {
    int64_t e = 1;
    for (const int64_t d : s.hf_shape.empty() ? s.shape : s.hf_shape) e *= d;
    n += e;
  }
  return n;
}

TEST(LlamaConfig, SmolLm135mHasItsPublishedParameterCount) {
  const LlamaConfig c = llama_config_from_hf(smollm_135m(), "config.json", 64);
  EXPECT_EQ(c.n_layer, 30);
  EXPECT_EQ(c.n_kv_head, 3);
  EXPECT_EQ(c.head_size(), 64);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.padded_vocab_size, 49152);
  EXPECT_EQ(llama_num_params(c), 134515008);
  EXPECT_EQ(table_params(llama_param_table(c)), 134515008);
  // The preset of the same shape over GPT-2's vocabulary.
  const LlamaConfig p = llama_preset("llama-135m");
  EXPECT_EQ(llama_num_params(p), 135151488);
  EXPECT_EQ(table_params(llama_param_table(p)), llama_num_params(p));
}

TEST(LlamaConfig, TableHasLlamaForCausalLMNamesAndFusedProjections) {
  LlamaConfig c = llama_preset("llama-tiny");
  const ParamTable t = llama_param_table(c);
  const auto& q = t.get("model.layers.1.self_attn.q_proj.weight");
  const auto& k = t.get("model.layers.1.self_attn.k_proj.weight");
  const auto& v = t.get("model.layers.1.self_attn.v_proj.weight");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{64, 64}));  // nn.Linear [out, in]
  EXPECT_EQ(k.shape, (std::vector<int64_t>{32, 64}));  // 2 key/value heads of 16
  // q, k, v consecutive: one [(n_head + 2·n_kv_head)·HS, C] weight for the packed qkv.
  EXPECT_EQ(k.offset, q.offset + 64 * 64);
  EXPECT_EQ(v.offset, k.offset + 32 * 64);
  const auto& gate = t.get("model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(t.get("model.layers.0.mlp.up_proj.weight").offset, gate.offset + 176 * 64);  // SwiGLU's gate_up
  EXPECT_NO_THROW(t.get("lm_head.weight"));
  EXPECT_NO_THROW(t.get("model.norm.weight"));
  c.tie_embeddings = true;
  c.qk_norm = true;
  c.mlp = LlamaMlp::Relu2;
  const ParamTable tied = llama_param_table(c);
  EXPECT_THROW(tied.get("lm_head.weight"), Error);
  EXPECT_THROW(tied.get("model.layers.0.mlp.gate_proj.weight"), Error);
  EXPECT_EQ(tied.get("model.layers.0.self_attn.k_norm.weight").shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(table_params(tied), llama_num_params(c));
}

TEST(LlamaConfig, ConfigJsonRoundTrips) {
  LlamaConfig c = llama_preset("llama-mini");
  c.rope_theta = 500000.0f;
  c.rms_eps = 1e-6f;
  const LlamaConfig back = llama_config_from_hf(hf_llama_config(c), "config.json", 128);
  EXPECT_EQ(back.n_layer, c.n_layer);
  EXPECT_EQ(back.n_head, c.n_head);
  EXPECT_EQ(back.n_kv_head, c.n_kv_head);
  EXPECT_EQ(back.n_embd, c.n_embd);
  EXPECT_EQ(back.intermediate, c.intermediate);
  EXPECT_EQ(back.vocab_size, c.vocab_size);
  EXPECT_EQ(back.padded_vocab_size, c.padded_vocab_size);
  EXPECT_EQ(back.block_size, c.block_size);
  EXPECT_EQ(back.rope_theta, c.rope_theta);
  EXPECT_EQ(back.rms_eps, c.rms_eps);
  EXPECT_EQ(back.tie_embeddings, c.tie_embeddings);
  EXPECT_FALSE(back.qk_norm);
  EXPECT_EQ(back.mlp, LlamaMlp::SwiGlu);
}

// QK-norm is Qwen3's form (transformers computes it with the same names); ReLU² has no
// transformers class, so its config is one transformers refuses (model_type mptrain_llama).
TEST(LlamaConfig, QkNormIsQwen3AndRelu2IsMptrainsOwnType) {
  LlamaConfig c = llama_preset("llama-tiny");
  c.qk_norm = true;
  nlohmann::json j = hf_llama_config(c);
  EXPECT_EQ(j["model_type"], "qwen3");
  EXPECT_EQ(j["architectures"][0], "Qwen3ForCausalLM");
  EXPECT_EQ(j["use_sliding_window"], false);
  EXPECT_TRUE(has_hf_form(c));
  LlamaConfig back = llama_config_from_hf(j, "config.json", 128);
  EXPECT_TRUE(back.qk_norm);
  EXPECT_EQ(back.mlp, LlamaMlp::SwiGlu);
  j["use_sliding_window"] = true;
  EXPECT_THROW(llama_config_from_hf(j, "config.json", 128), Error);
  j["use_sliding_window"] = false;
  j["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_THROW(llama_config_from_hf(j, "config.json", 128), Error);

  for (const bool qk : {false, true}) {
    c.qk_norm = qk;
    c.mlp = LlamaMlp::Relu2;
    j = hf_llama_config(c);
    EXPECT_EQ(j["model_type"], "mptrain_llama");
    EXPECT_EQ(j["hidden_act"], "relu2");
    EXPECT_FALSE(has_hf_form(c));
    back = llama_config_from_hf(j, "config.json", 128);
    EXPECT_EQ(back.mlp, LlamaMlp::Relu2);
    EXPECT_EQ(back.qk_norm, qk);
  }
  // relu2 is mptrain's own form only: LlamaForCausalLM's MLP is gated.
  j = hf_llama_config(llama_preset("llama-tiny"));
  j["hidden_act"] = "relu2";
  EXPECT_THROW(llama_config_from_hf(j, "config.json", 128), Error);
}

void expect_error(nlohmann::json cfg, const char* key, const nlohmann::json& value, const std::string& want) {
  cfg[key] = value;
  try {
    llama_config_from_hf(cfg, "config.json", 64);
    ADD_FAILURE() << key << " " << value.dump() << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(LlamaConfig, UnsupportedSettingsAreOneClearError) {
  const nlohmann::json ok = smollm_135m();
  expect_error(ok, "rope_scaling", {{"type", "linear"}, {"factor", 2.0}}, "rope_scaling");
  expect_error(ok, "num_key_value_heads", 4, "n_kv_head (4) does not divide n_head (9)");
  expect_error(ok, "hidden_act", "gelu", "hidden_act 'gelu'");
  expect_error(ok, "attention_bias", true, "attention_bias");
  expect_error(ok, "head_dim", 128, "head_dim");
  expect_error(ok, "model_type", "gpt2", "is not Llama");
  expect_error(ok, "rope_theta", -1.0, "rope_theta");
  EXPECT_THROW(llama_preset("llama-7b"), Error);
}

}  // namespace
}  // namespace mptrain
