// The Llama family (issue 40), written once over the op interface like GPT-2 (model/gpt2.h), with
// Hugging Face LlamaForCausalLM's names and nn.Linear weights [out, in] (model/llama_config.h):
// per block, RMSNorm → q|k|v in one product → rotary embeddings on the q and k heads →
// grouped-query causal attention → o_proj into the residual stream; RMSNorm → gate|up in one
// product → SwiGLU → down_proj into the residual stream. No biases; the head tied to the
// embeddings or its own. The passes around the blocks (staging, the fused loss, graphs, the
// head's backward) are CausalLm's.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/param_table.h"
#include "model/activation_plan.h"
#include "model/causal_lm.h"
#include "model/llama_config.h"
#include "model/policy_backend.h"
#include "precision/policy.h"

namespace mptrain {

// Pointers into a flat buffer laid out by llama_param_table (parameters or their gradients):
// qkv is q_proj's first element (k and v follow it: one [(NH + 2·KV)·HS, C] matrix), gate_up
// gate_proj's (up follows: [2I, C]; ReLU²: up_proj's, [I, C]); q_norm and k_norm [HS] with
// QK-norm (else null); head is lm_head, or the embeddings when tied.
struct LlamaLayerTensors {
  float *attn_norm, *qkv, *o, *mlp_norm, *gate_up, *down;
  float *q_norm = nullptr, *k_norm = nullptr;
};
struct LlamaTensors {
  float* embed;  // [Vp, C]
  std::vector<LlamaLayerTensors> layers;
  float *norm, *head;
};
LlamaTensors bind_llama_tensors(const LlamaConfig& config, const ParamTable& table, float* base);

// qkv_raw, q_rstd, k_rstd: QK-norm's input (the product's q|k|v) and its statistics (kNone
// without). gate_up: ReLU²'s up alone.
struct LlamaLayerActs {
  ActivationPlan::Handle ln1, ln1_rstd, qkv, att, atty, residual2, ln2, ln2_rstd, gate_up, act, residual3;
  ActivationPlan::Handle qkv_raw = ActivationPlan::kNone, q_rstd = ActivationPlan::kNone,
                         k_rstd = ActivationPlan::kNone;
};
struct LlamaActs {
  ActivationPlan::Handle encoded, lnf, lnf_rstd;
  LmHeadActs head;
  ActivationPlan::Handle attn_scratch, gemm_out;  // gemm_out: the linears' fp32 accumulator
  ActivationPlan::Handle dresidual, dln, dqkv, datty, dact, dgate_up;
  ActivationPlan::Handle dout_lp;  // dresidual as a GEMM operand (kNone in fp32)
  std::vector<LlamaLayerActs> layers;
};

// The activation plan of a B×T micro-batch under `policy` for backend `be`, built without
// allocating (as gpt2_activation_plan).
ActivationPlan llama_activation_plan(const LlamaConfig& config, const Policy& policy, const Backend& be,
                                     int B, int T, LlamaActs* handles = nullptr);

// Which GEMM reads a parameter: the head (lm_head, or the tied embeddings) the LM head's, the
// blocks' matrices the linears'; the norms and an untied embedding table none.
GemmReaderFn llama_gemm_reader(bool tied_head);

class Llama : public CausalLm {
 public:
  // As Gpt2's constructors. A backend without grouped-query attention refuses n_kv_head < n_head.
  Llama(const LlamaConfig& config, std::unique_ptr<Backend>&& be, const Policy& policy);
  Llama(const LlamaConfig& config, std::unique_ptr<Backend>&& be, Precision precision = Precision::Fp32);
  ~Llama();

  const LlamaConfig& config() const { return config_; }

  // Every matrix N(0, init_std) (the projections into the residual stream / sqrt(2·n_layer), as
  // GPT-2's), the norms' gains 1, padded vocabulary rows 0; counter-based from the seed.
  void init_weights(uint64_t seed) override;

 private:
  ActivationPlan plan_activations(int B, int T) override;
  void forward_impl(int B, int T) override;
  void backward_impl(int B, int T) override;
  void setup_weight_copies();
  // One block's forward from its input `residual`, and the pieces of it --recompute refills.
  void forward_block(int l, const View& residual, int B, int T);
  void block_norm(int l, int which, const View& residual, int N);
  void block_mlp_in(int l, int N);
  void qk_norm_forward(const LlamaLayerTensors& w, const LlamaLayerActs& la, const View& qkv, int N);
  void qk_norm_backward(const LlamaLayerTensors& w, const LlamaLayerTensors& g, const LlamaLayerActs& la,
                        const View& dqkv, int N);
  int mlp_in() const;  // the MLP's first product's width: 2I (gate | up) or I (ReLU²'s up)

  struct LayerWeights {
    WeightRef qkv, o, gate_up, down;
  };

  LlamaConfig config_;
  LlamaTensors w_, g_;
  LlamaActs a_{};
  std::vector<LayerWeights> wc_;
  WeightRef head_c_;
};

}  // namespace mptrain
