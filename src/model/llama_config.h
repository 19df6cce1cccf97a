// Llama-family hyper-parameters (issue 40's third family), the named presets and the parameter
// table with Hugging Face's LlamaForCausalLM names. The blocks: RMSNorm before attention and MLP,
// rotary position embeddings (rotate-half), grouped-query attention (n_kv_head key/value heads), a
// SwiGLU MLP (or ReLU², modded-nanogpt's), no biases, optional QK-norm, a tied or untied head.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/param_table.h"
#include "model/recompute.h"

namespace mptrain {

enum class LlamaMlp { SwiGlu, Relu2 };

struct LlamaConfig {
  int block_size = 2048;          // the longest sequence (max_position_embeddings)
  int vocab_size = 50257;         // V (GPT-2's BPE by default, so a race compares architectures)
  int padded_vocab_size = 50304;  // Vp
  int n_layer = 12;
  int n_head = 12;
  int n_kv_head = 12;  // a divisor of n_head: n_head = MHA, 1 = MQA
  int n_embd = 768;
  int intermediate = 2048;  // the MLP's width
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  float init_std = 0.02f;
  bool tie_embeddings = false;
  bool qk_norm = false;  // RMSNorm over each q and k head before the rotation (per-head weights)
  LlamaMlp mlp = LlamaMlp::SwiGlu;
  // Training-time, not saved with the model: what the backward recomputes instead of keeping
  // (model/recompute.h: norm, mlp, block; GELU is not Llama's activation).
  RecomputeSet recompute;

  int head_size() const { return n_embd / n_head; }
  int kv_width() const { return n_kv_head * head_size(); }  // k's (and v's) width
};

// Presets: llama-tiny (tests: 2 layers, 64 wide, 4 heads over 2 key/value heads), llama-mini
// (4 × 256), llama-d6 (GPT-2 d6's size: 6 × 384, 6 heads, MLP 1024, tied), llama-135m (SmolLM-135M's shape,
// gpt2's size class: 30 layers, 576 wide, 9 heads over 3, MLP 1536, tied head; 134.5M parameters over
// SmolLM's 49,152 tokens, 135.2M over GPT-2's 50,257). Throws Error listing the known names for an unknown
// one. `block`: the options a run picks on top of the preset's shape (train's and bench's --mlp, --qk-norm).
struct LlamaBlockOptions {
  LlamaMlp mlp = LlamaMlp::SwiGlu;
  bool qk_norm = false;
};
LlamaConfig llama_preset(const std::string& name, int vocab_multiple = 128,
                         const LlamaBlockOptions& block = {});
std::vector<std::string> llama_preset_names();

// Checks the invariants (heads divide the width, key/value heads divide the heads, an even head
// size for the rotation, positive sizes, finite theta and eps); throws Error naming the problem.
void validate(const LlamaConfig& config);

// The parameter table, Hugging Face's names and layouts (nn.Linear weights [out, in]):
// model.embed_tokens, per layer input_layernorm, self_attn.{q,k,v,o}_proj (q, k, v consecutive: one
// [(n_head + 2·n_kv_head)·HS, C] weight, the attention op's packed qkv), optional
// self_attn.{q,k}_norm [HS], post_attention_layernorm, mlp.{gate,up,down}_proj (gate and up
// consecutive: one [2I, C] weight, SwiGLU's gate_up; ReLU²: up and down only), then model.norm and
// lm_head (absent when tied).
ParamTable llama_param_table(const LlamaConfig& config);

// The MLP's first weight: gate_proj (SwiGLU: gate and up follow as one [2I, C]) or up_proj (ReLU²).
std::string llama_mlp_in_name(const LlamaConfig& config);

// Parameters as Hugging Face counts them (the real vocabulary, not Vp; the tied head once).
int64_t llama_num_params(const LlamaConfig& config);

// FLOPs of one training step per token: 6 per weight that takes part in a product (the head over
// Vp; embeddings excluded) plus causal attention's 6·L·C·T.
double llama_flops_per_token(const LlamaConfig& config, int T);
// What --recompute adds to that per token (as gpt2_recompute_flops_per_token): a block's forward
// for `block`, the MLP's input product for `mlp`, the attention's two products for `attention`;
// `norm` reruns elementwise RMSNorms only (0 here).
double llama_recompute_flops_per_token(const LlamaConfig& config, int T, RecomputeSet set);

}  // namespace mptrain
