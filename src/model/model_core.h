// What every model family (Gpt2, Bert) holds and how its passes reach it, written once: the
// precision policy, the parameter table, the backend, and in the backend's memory the fp32
// master parameters and gradients, the weight copies and gradients the GEMMs read and write
// (model/weight_copies.h, model/weight_grads.h) and the activation plan.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>

#include "backend/backend.h"
#include "core/buffer.h"
#include "core/param_table.h"
#include "model/activation_plan.h"
#include "model/weight_copies.h"
#include "model/weight_grads.h"
#include "precision/policy.h"
#include "precision/precision.h"

namespace mptrain {

class ModelCore {
 public:
  Precision precision() const { return precision_; }
  const Policy& policy() const { return policy_; }
  const ParamTable& table() const { return table_; }
  // Non-const access marks the GEMM weight copies stale: any writer of the parameters goes
  // through it (or init_weights), and the next forward refreshes the copies.
  FloatBuffer& params() {
    copies_.mark_stale();
    return params_;
  }
  const FloatBuffer& params() const { return params_; }
  FloatBuffer& grads() { return grads_; }
  const FloatBuffer& grads() const { return grads_; }
  void zero_grad() { grads_.zero(); }
  // The backend the passes run on; the optimizer updates the parameters there too.
  Backend& backend() const { return *be_; }
  // Called during each backward with every range of grads() as it becomes final for the
  // micro-batch (model/weight_grads.h), in the order backward finishes them; empty: none.
  void set_grads_ready_hook(GradsReadyHook hook) { wgrads_.set_ready_hook(std::move(hook)); }
  size_t num_params() const { return table_.total(); }  // in memory (padded vocabulary rows included)
  int planned_batch() const { return plan_B_; }
  int planned_seq() const { return plan_T_; }
  size_t activation_bytes() const { return acts_.total_bytes(); }
  const ActivationPlan& activation_plan() const { return acts_; }
  size_t weight_copy_bytes() const { return copies_.bytes(); }
  // The GEMM weight copies, for an optimizer update that writes them (train/step.cpp).
  WeightCopies& weight_copies() { return copies_; }

 protected:
  // Allocates the parameters and gradients in be's memory and refuses (Error naming the op and
  // the dtypes) a policy the backend cannot run.
  ModelCore(ParamTable table, std::unique_ptr<Backend> be, const Policy& policy);
  ~ModelCore();
  // What the pass reads for the non-GEMM weight at `master` (its 16-bit copy on a GPU's plan),
  // and where it writes the gradient of the parameter whose fp32 gradient is at `grad`.
  View small(const float* master, std::initializer_list<std::int64_t> dims) const {
    return copies_.view(master, params_.data(), dims);
  }
  View grad(const float* grad, std::initializer_list<std::int64_t> dims) {
    return wgrads_.at(grad, grads_, dims);
  }
  // The passes' linears: each GEMM weight read through its copy (already in its arithmetic's
  // values when the policy is mixed), the products in the arithmetic of `kind`'s rule (the
  // hidden linears' or the LM head's), a residual epilogue rounding as the linear's output.
  void linear(LinearArgs a, OpRole kind = OpRole::Linear);
  void linear_backward(LinearBackwardArgs a, OpRole kind = OpRole::Linear);
  // The passes' LayerNorms: the one whose weights are the masters at gamma, beta (read through
  // small(), their gradients at dgamma, dbeta through grad()), with its saved statistics:
  //   layernorm           out (=) LN(x); mean, rstd (=)
  //   layernorm_backward  dx (+=) and the weights' gradients (+=) from dout; x the normalised input
  void layernorm(const View& out, const View& x, const float* gamma, const float* beta,
                 ActivationPlan::Handle mean, ActivationPlan::Handle rstd, float eps);
  void layernorm_backward(const View& dx, const View& dout, const View& x, const float* gamma,
                          const float* dgamma, const float* dbeta, ActivationPlan::Handle mean,
                          ActivationPlan::Handle rstd);
  // RMSNorm (Llama's): the same with no mean and no shift (LayerNormArgs::rms).
  void rmsnorm(const View& out, const View& x, const float* gamma, ActivationPlan::Handle rstd, float eps);
  void rmsnorm_backward(const View& dx, const View& dout, const View& x, const float* gamma, const float* dgamma,
                        ActivationPlan::Handle rstd);
  // The passes' attention over the heads in qkv under at_, keeping its state in `saved` (the
  // layer's) and working in `scratch` (shared); causal, or under key_mask, or over packed
  // sequences (cu_seqlens, backend/backend.h); kv_heads key/value heads (grouped-query; 0: NH).
  // And its backward, given the forward's out.
  void attention(const View& out, const View& qkv, ActivationPlan::Handle saved,
                 ActivationPlan::Handle scratch, int B, int T, int NH, bool causal, const View& key_mask = {},
                 const View& cu_seqlens = {}, int kv_heads = 0);
  void attention_backward(const View& dqkv, const View& dout, const View& out, const View& qkv,
                          ActivationPlan::Handle saved, ActivationPlan::Handle scratch, int B, int T, int NH,
                          bool causal, const View& cu_seqlens = {}, int kv_heads = 0);

  Precision precision_;
  Policy policy_;
  bool mixed_;  // !policy_.all_fp32(): the GEMM weight copies hold their arithmetic's values
  ParamTable table_;
  // Declared before every buffer in its memory, so that it outlives them.
  std::unique_ptr<Backend> be_;
  FloatBuffer params_, grads_;
  WeightGrads wgrads_;  // where backward writes dW, db
  ActivationPlan acts_;
  int plan_B_ = 0, plan_T_ = 0;
  AttentionDtypes at_;   // the attention's dtypes under policy_
  WeightCopies copies_;  // every GEMM weight's copy, refreshed lazily
};

}  // namespace mptrain
