// GPT-2 on the CPU backend: parameter table, activation plan, and the forward and
// backward passes written out layer by layer (no autograd).
//
// Weights use Hugging Face's Conv1D layout [in, out], so checkpoints are plain copies.
// The LM head is tied to wte (logits = lnf · wte^T over the padded vocabulary Vp).
#pragma once
#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "model/activation_plan.h"
#include "model/gpt2_config.h"
#include "model/param_table.h"
#include "precision/precision.h"

namespace mptrain {

namespace cpu {
class Context;
}

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
Gpt2Tensors bind_gpt2_tensors(const ParamTable& table, float* base, int n_layer);

// FLOPs of one training step (forward + backward) per token: 6·N for the matrix
// products over all N parameters that take part in GEMMs (wpe excluded; wte counted
// once, as the LM head over Vp) plus 6·L·C·T for causal attention's two T×T products
// (forward 2·2·T·C/2 per token and layer, backward twice that).
double gpt2_flops_per_token(const Gpt2Config& config, int T);

class Gpt2 {
 public:
  Gpt2(const Gpt2Config& config, cpu::Context& ctx, Precision precision = Precision::Fp32);

  const Gpt2Config& config() const { return config_; }
  Precision precision() const { return precision_; }
  const ParamTable& table() const { return table_; }
  FloatBuffer& params() { return params_; }
  const FloatBuffer& params() const { return params_; }
  FloatBuffer& grads() { return grads_; }
  const FloatBuffer& grads() const { return grads_; }
  size_t num_params() const { return table_.total(); }

  // GPT-2 / nanoGPT initialisation from a seed (counter-based: independent of threads).
  void init_weights(uint64_t seed);

  // Plans and allocates activations for micro-batches of up to B×T tokens.
  void plan(int B, int T);
  int planned_batch() const { return plan_B_; }
  int planned_seq() const { return plan_T_; }
  size_t activation_floats() const { return acts_.total_floats(); }

  // Forward pass. tokens[B,T] must be valid ids (< V); targets may be null (logits only).
  // Returns the mean loss over targets != -1 (0 when targets is null).
  float forward(const int* tokens, const int* targets, int B, int T);

  // Forward, then backward with gradients ACCUMULATED (+=) into grads(): the mean loss is
  // scaled by grad_scale (1/accumulation steps) before differentiation. Returns the mean loss.
  float forward_backward(const int* tokens, const int* targets, int B, int T, float grad_scale);

  // Sophia's Gauss-Newton-Bartlett pass: forward, labels drawn from the model's own softmax
  // inside the fused loss (cpu::crossentropy_sampled_forward_backward, RNG (seed, counter)),
  // then backward with gradients ACCUMULATED (+=) into grads() of grad_scale · the mean loss
  // over all B·T positions on those labels. sampled[B*T] (=) the labels. Returns that mean loss.
  float forward_backward_sampled(const int* tokens, int* sampled, int B, int T, float grad_scale, uint64_t seed,
                                 uint64_t counter);

  // Logits of the last forward, [B,T,Vp] (valid until the next forward_backward overwrites them).
  const float* logits();
  const float* losses();  // per-token losses [B,T] of the last forward with targets

  void zero_grad() { grads_.zero(); }

 private:
  void forward_impl(const int* tokens, int B, int T);
  float loss_impl(const int* targets, int B, int T, float grad_scale, bool backward);
  void backward_impl(const int* tokens, int B, int T);

  struct LayerActs {
    ActivationPlan::Handle ln1, ln1_mean, ln1_rstd, qkv, att, atty, residual2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, residual3;
  };
  struct Acts {
    ActivationPlan::Handle encoded, lnf, lnf_mean, lnf_rstd, logits, losses, dloss;
    ActivationPlan::Handle attn_scratch, proj_out;
    ActivationPlan::Handle dresidual, dln, dqkv, datty, dfch;
    std::vector<LayerActs> layers;
  };

  Gpt2Config config_;
  cpu::Context& ctx_;
  Precision precision_;
  ParamTable table_;
  FloatBuffer params_, grads_;
  Gpt2Tensors w_, g_;
  ActivationPlan acts_;
  Acts a_{};
  int plan_B_ = 0, plan_T_ = 0;
};

}  // namespace mptrain
