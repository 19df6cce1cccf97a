// GPT-2, written once over the op interface (any backend: the CPU's, the GPU's): parameter table,
// activation plan, and the forward and backward passes written out layer by layer (no autograd).
//
// Weights use Hugging Face's Conv1D layout [in, out], so checkpoints are plain copies.
// The LM head is tied to wte (logits = lnf · wte^T over the padded vocabulary Vp).
//
// Precision: the model reads its precision policy (precision/policy.h) for every dtype, and runs
// one forward and backward (gpt2_pass.cpp) over the op interface for all of them: activations
// in the policy's dtypes, GEMMs with fp32 accumulation, fp32 master parameters and gradients.
// An all-fp32 policy runs the backend's kernels with fp32 dtypes (bit for bit the original fp32 path).
//
// Weight copies: each GEMM weight is read through a copy in its GEMM's operand format (bf16,
// fp16, TF32-rounded fp32), refreshed from the fp32 master weights once per optimizer step.
// Contract: any writer of the parameters goes through the non-const params() (or init_weights),
// which marks the copies stale; the next forward refreshes them before its first GEMM. A pointer
// kept from an earlier params() call must not be written after a forward without calling
// params() again. train_step calls params() for every optimizer step, so a step's update is
// seen by the next forward.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/param_table.h"
#include "model/activation_plan.h"
#include "model/causal_lm.h"
#include "model/gpt2_config.h"
#include "model/policy_backend.h"
#include "precision/policy.h"

namespace mptrain {


// The parameter table for a config (order: wte, wpe, h.0 … h.L-1, ln_f).
ParamTable gpt2_param_table(const Gpt2Config& config);

// Pointers into a flat buffer laid out by gpt2_param_table (parameters or their gradients).
struct Gpt2LayerTensors {
  float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *attproj_w, *attproj_b;
  float *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
};
struct Gpt2Tensors {
  float* wte;  // [Vp, C]
  float* wpe;  // [block_size, C]
  std::vector<Gpt2LayerTensors> layers;
  float *lnf_w, *lnf_b;
};

inline Gpt2Tensors bind_gpt2_tensors(const ParamTable& table, float* base, int n_layer) {
  auto at = [&](const std::string& name) { return base + table.get(name).offset; };
  Gpt2Tensors t;
  t.wte = at("wte.weight");
  t.wpe = at("wpe.weight");
  for (int l = 0; l < n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    t.layers.push_back({at(p + "ln_1.weight"), at(p + "ln_1.bias"), at(p + "attn.c_attn.weight"),
                        at(p + "attn.c_attn.bias"), at(p + "attn.c_proj.weight"), at(p + "attn.c_proj.bias"),
                        at(p + "ln_2.weight"), at(p + "ln_2.bias"), at(p + "mlp.c_fc.weight"),
                        at(p + "mlp.c_fc.bias"), at(p + "mlp.c_proj.weight"), at(p + "mlp.c_proj.bias")});
  }
  t.lnf_w = at("ln_f.weight");
  t.lnf_b = at("ln_f.bias");
  return t;
}

// FLOPs of one training step (forward + backward) per token: 6·N for the matrix
// products over all N parameters that take part in GEMMs (wpe excluded; wte counted
// once, as the LM head over Vp) plus 6·L·C·T for causal attention's two T×T products
// (forward 2·2·T·C/2 per token and layer, backward twice that).
double gpt2_flops_per_token(const Gpt2Config& config, int T);
// What --recompute adds to that, per token, in the same convention (a linear's 2 FLOPs per
// weight and token, the attention's 2·C·T a block): a block's forward for `block`, the fc linear
// for `mlp`, the attention's two products for `attention`; `norm` and `gelu` rerun elementwise ops
// only (0 here).
double gpt2_recompute_flops_per_token(const Gpt2Config& config, int T, RecomputeSet set);

// Handles of every activation buffer, filled by gpt2_activation_plan. An fp32 policy plans the
// original set (proj_out is its gemm_out, dfch its dfch_gelu, no dout_lp or dlogits_lp); the
// others add typed buffers.
struct Gpt2LayerActs {
  ActivationPlan::Handle ln1, ln1_mean, ln1_rstd, qkv, att, atty, residual2, ln2, ln2_mean, ln2_rstd, fch,
      fch_gelu, residual3;
};
struct Gpt2Acts {
  ActivationPlan::Handle encoded, lnf, lnf_mean, lnf_rstd, logits, losses, dloss;
  ActivationPlan::Handle attn_scratch, gemm_out;  // gemm_out: the linears' fp32 accumulator
  ActivationPlan::Handle dresidual, dln, dqkv, datty, dfch, dfch_gelu;
  // working memory of the 16-bit / TF32 policies: dy and dlogits converted once (kNone in fp32)
  ActivationPlan::Handle dout_lp, dlogits_lp;
  std::vector<Gpt2LayerActs> layers;
};

// The activation plan of a B×T micro-batch under `policy`, built without allocating (so that
// `mptrain explain` reports exactly what Gpt2::plan allocates) for backend `be`, which sizes
// what the attention keeps. The converted-once GEMM operands are in policy.operand(...).
ActivationPlan gpt2_activation_plan(const Gpt2Config& config, const Policy& policy, const Backend& be, int B,
                                    int T, Gpt2Acts* handles = nullptr);

// Which GEMM reads a parameter: wte is the LM head, the four Conv1D weights of each block are
// linears; the rest (wpe, biases, LayerNorms) is read by none. Those read get a low-precision copy.
GemmReader gpt2_gemm_reader(const ParamSpec& spec);
// Bytes of those copies under `policy` (0 when every GEMM is fp32).
size_t gpt2_weight_copy_bytes(const Gpt2Config& config, const Policy& policy);

class Gpt2 : public CausalLm {
 public:
  // On backend `be` (its memory holds the parameters, gradients and activations; the policy
  // must be one it runs, else Error naming the op and dtypes): an explicit policy (e.g.
  // make_policy(p, parse_op_precision(...))), or the precision's plan for the backend's caps.
  // The passes (plan, forward, forward_backward, the sampled pass, logits, graphs) are
  // CausalLm's (model/causal_lm.h).
  Gpt2(const Gpt2Config& config, std::unique_ptr<Backend>&& be, const Policy& policy);
  Gpt2(const Gpt2Config& config, std::unique_ptr<Backend>&& be, Precision precision = Precision::Fp32);
  ~Gpt2();

  const Gpt2Config& config() const { return config_; }

  // GPT-2 / nanoGPT initialisation from a seed (counter-based: independent of threads).
  void init_weights(uint64_t seed) override;

 private:
  ActivationPlan plan_activations(int B, int T) override;
  void forward_impl(int B, int T) override;
  void backward_impl(int B, int T) override;  // over the tokens CausalLm staged
  void setup_weight_copies();
  // Block l's forward from its input `residual`, into its activations (the forward's, and under
  // --recompute block the backward's refill of the shared ones); and the pieces --recompute norm
  // and mlp refill: a LayerNorm output, the fc linear's output and its GELU.
  void forward_block(int l, const View& residual, int B, int T);
  void block_layernorm(int l, int which, const View& residual, int N);
  void block_fc(int l, int N);

  using LayerActs = Gpt2LayerActs;
  using Acts = Gpt2Acts;
  struct LayerWeights {
    WeightRef qkv_w, attproj_w, fc_w, fcproj_w;
  };

  Gpt2Config config_;
  Gpt2Tensors w_, g_;
  Acts a_{};
  std::vector<LayerWeights> wc_;
  WeightRef wte_c_;
};

}  // namespace mptrain
