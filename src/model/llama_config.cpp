// Llama presets, validation and the parameter table (model/llama_config.h).
#include "model/llama_config.h"

#include <cmath>
#include <map>

#include "core/error.h"
#include "model/gpt2_config.h"  // pad_vocab
#include "model/presets.h"

namespace mptrain {

namespace {
struct Shape {
  int n_layer, n_head, n_kv_head, n_embd, intermediate;
  bool tie;
};
const std::map<std::string, Shape>& preset_table() {
  static const std::map<std::string, Shape> table = {
      {"llama-tiny", {2, 4, 2, 64, 176, false}},
      {"llama-mini", {4, 4, 2, 256, 688, false}},
      // GPT-2 d6's twin for the block race (issue 40): 6 × 384, 6 heads, tied, and the MLP at 8/3·C
      // so that a block has GPT-2's 12·C² weights (4·C² attention, 3·C·I = 8·C² SwiGLU).
      {"llama-d6", {6, 6, 6, 384, 1024, true}},
      {"llama-135m", {30, 9, 3, 576, 1536, true}},
  };
  return table;
}
}  // namespace

std::vector<std::string> llama_preset_names() { return preset_names(preset_table()); }

LlamaConfig llama_preset(const std::string& name, int vocab_multiple, const LlamaBlockOptions& block) {
  const Shape& s = preset_shape(preset_table(), name, "Llama");
  LlamaConfig c;
  c.n_layer = s.n_layer;
  c.n_head = s.n_head;
  c.n_kv_head = s.n_kv_head;
  c.n_embd = s.n_embd;
  c.intermediate = s.intermediate;
  c.tie_embeddings = s.tie;
  c.mlp = block.mlp;
  c.qk_norm = block.qk_norm;
  c.padded_vocab_size = pad_vocab(c.vocab_size, vocab_multiple);
  return c;
}

void validate(const LlamaConfig& c) {
  MPT_CHECK(c.n_layer > 0 && c.n_head > 0 && c.n_kv_head > 0 && c.n_embd > 0 && c.intermediate > 0 &&
                c.block_size > 0 && c.vocab_size > 0,
            "model sizes must be positive");
  MPT_CHECK(c.n_embd % c.n_head == 0, "n_embd (" + std::to_string(c.n_embd) +
                                          ") is not divisible by n_head (" + std::to_string(c.n_head) + ")");
  MPT_CHECK(c.n_head % c.n_kv_head == 0, "n_kv_head (" + std::to_string(c.n_kv_head) +
                                             ") does not divide n_head (" + std::to_string(c.n_head) + ")");
  MPT_CHECK(c.head_size() % 2 == 0, "the head size (" + std::to_string(c.head_size()) +
                                        ") must be even: rotary embeddings turn channel pairs");
  MPT_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 1.0f, "rope_theta must be finite and above 1");
  MPT_CHECK(std::isfinite(c.rms_eps) && c.rms_eps > 0.0f, "rms_norm_eps must be positive and finite");
  MPT_CHECK(c.padded_vocab_size >= c.vocab_size, "padded vocab smaller than the vocabulary");
}

ParamTable llama_param_table(const LlamaConfig& c) {
  validate(c);
  const int64_t C = c.n_embd, Vp = c.padded_vocab_size, V = c.vocab_size, I = c.intermediate;
  const int64_t HS = c.head_size(), KVW = c.kv_width();
  constexpr MatrixLayout OutIn = MatrixLayout::OutIn;
  ParamTable t;
  t.add("model.embed_tokens.weight", {Vp, C}, InitRule::NormalRowsThenZeros, true, {V, C});
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.add(p + "input_layernorm.weight", {C}, InitRule::Ones, false);
    t.add_matrix(p + "self_attn.q_proj.weight", {C, C}, InitRule::Normal, OutIn, QkvRole::Part);
    t.add_matrix(p + "self_attn.k_proj.weight", {KVW, C}, InitRule::Normal, OutIn, QkvRole::Part);
    t.add_matrix(p + "self_attn.v_proj.weight", {KVW, C}, InitRule::Normal, OutIn, QkvRole::Part);
    if (c.qk_norm) {
      t.add(p + "self_attn.q_norm.weight", {HS}, InitRule::Ones, false);
      t.add(p + "self_attn.k_norm.weight", {HS}, InitRule::Ones, false);
    }
    t.add_matrix(p + "self_attn.o_proj.weight", {C, C}, InitRule::NormalResidual, OutIn);
    t.add(p + "post_attention_layernorm.weight", {C}, InitRule::Ones, false);
    if (c.mlp == LlamaMlp::SwiGlu) t.add_matrix(p + "mlp.gate_proj.weight", {I, C}, InitRule::Normal, OutIn);
    t.add_matrix(p + "mlp.up_proj.weight", {I, C}, InitRule::Normal, OutIn);
    t.add_matrix(p + "mlp.down_proj.weight", {C, I}, InitRule::NormalResidual, OutIn);
  }
  t.add("model.norm.weight", {C}, InitRule::Ones, false);
  if (!c.tie_embeddings) t.add("lm_head.weight", {Vp, C}, InitRule::NormalRowsThenZeros, true, {V, C});
  return t;
}

std::string llama_mlp_in_name(const LlamaConfig& c) {
  return c.mlp == LlamaMlp::SwiGlu ? "mlp.gate_proj.weight" : "mlp.up_proj.weight";
}

int64_t llama_num_params(const LlamaConfig& c) {
  const int64_t C = c.n_embd, V = c.vocab_size, I = c.intermediate, KVW = c.kv_width(), HS = c.head_size();
  const int64_t mlp = (c.mlp == LlamaMlp::SwiGlu ? 3 : 2) * I * C;
  const int64_t layer = 2 * C + 2 * C * C + 2 * KVW * C + mlp + (c.qk_norm ? 2 * HS : 0);
  return V * C * (c.tie_embeddings ? 1 : 2) + c.n_layer * layer + C;
}

double llama_flops_per_token(const LlamaConfig& c, int T) {
  const double C = c.n_embd, L = c.n_layer, I = c.intermediate, KVW = c.kv_width();
  const double layer = 2.0 * C * C + 2.0 * KVW * C + (c.mlp == LlamaMlp::SwiGlu ? 3.0 : 2.0) * I * C;
  return 6.0 * (L * layer + static_cast<double>(c.padded_vocab_size) * C) + 6.0 * L * C * T;
}

double llama_recompute_flops_per_token(const LlamaConfig& c, int T, RecomputeSet set) {
  const double C = c.n_embd, L = c.n_layer, I = c.intermediate, KVW = c.kv_width();
  const double mlp_in = (c.mlp == LlamaMlp::SwiGlu ? 2.0 : 1.0) * I * C;  // gate | up, or up
  const double layer = 2.0 * C * C + 2.0 * KVW * C + mlp_in + I * C;
  if (set.has(Recompute::Block)) return L * (2.0 * layer + 2.0 * C * T);
  return (set.has(Recompute::Mlp) ? L * 2.0 * mlp_in : 0.0) +
         (set.has(Recompute::Attention) ? L * 2.0 * C * T : 0.0);
}

}  // namespace mptrain
