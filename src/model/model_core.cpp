#include "model/model_core.h"

#include "model/policy_backend.h"

namespace mptrain {

ModelCore::ModelCore(ParamTable table, std::unique_ptr<Backend> be, const Policy& policy)
    : precision_(policy.precision),
      policy_(policy),
      mixed_(!policy.all_fp32()),
      table_(std::move(table)),
      be_(std::move(be)),
      at_(attention_dtypes(policy)) {
  MemoryResource& memory = be_->memory();
  params_.resize(table_.total(), memory);
  grads_.resize(table_.total(), memory);
  wgrads_.setup(table_.total(), policy_, memory);
  check_policy_supported(policy_, *be_);
}

ModelCore::~ModelCore() = default;

void ModelCore::linear(LinearArgs a, OpRole kind) {
  a.math = policy_.rule(kind).compute;
  a.w_rounded = mixed_;
  if (a.epilogue == Epilogue::BiasResidual) a.rounding = policy_.rule(kind).output;
  be_->linear(a);
}

void ModelCore::linear_backward(LinearBackwardArgs a, OpRole kind) {
  a.math = policy_.rule(kind).compute;
  a.w_rounded = mixed_;
  be_->linear_backward(a);
}

void ModelCore::layernorm(const View& out, const View& x, const float* gamma, const float* beta,
                          ActivationPlan::Handle mean, ActivationPlan::Handle rstd, float eps) {
  const std::int64_t N = x.dim(0), C = x.dim(1);
  be_->layernorm({out, acts_.row(mean, N), acts_.row(rstd, N), x, small(gamma, {C}), small(beta, {C}), eps});
}

void ModelCore::layernorm_backward(const View& dx, const View& dout, const View& x, const float* gamma,
                                   const float* dgamma, const float* dbeta, ActivationPlan::Handle mean,
                                   ActivationPlan::Handle rstd) {
  const std::int64_t N = x.dim(0), C = x.dim(1);
  be_->layernorm_backward({dx, grad(dgamma, {C}), grad(dbeta, {C}), dout, x, small(gamma, {C}),
                           acts_.row(mean, N), acts_.row(rstd, N)});
}

void ModelCore::rmsnorm(const View& out, const View& x, const float* gamma, ActivationPlan::Handle rstd,
                        float eps) {
  const std::int64_t N = x.dim(0), C = x.dim(1);
  be_->layernorm(
      {.out = out, .rstd = acts_.row(rstd, N), .x = x, .gamma = small(gamma, {C}), .eps = eps, .rms = true});
}

void ModelCore::rmsnorm_backward(const View& dx, const View& dout, const View& x, const float* gamma,
                                 const float* dgamma, ActivationPlan::Handle rstd) {
  const std::int64_t N = x.dim(0), C = x.dim(1);
  be_->layernorm_backward({.dx = dx,
                           .dgamma = grad(dgamma, {C}),
                           .dout = dout,
                           .x = x,
                           .gamma = small(gamma, {C}),
                           .rstd = acts_.row(rstd, N),
                           .rms = true});
}

void ModelCore::attention(const View& out, const View& qkv, ActivationPlan::Handle saved,
                          ActivationPlan::Handle scratch, int B, int T, int NH, bool causal,
                          const View& key_mask, const View& cu_seqlens, int kv_heads) {
  be_->attention({out, qkv, acts_.work(saved), acts_.work(scratch), B, T, NH, at_, causal, key_mask, cu_seqlens,
                  kv_heads});
}

void ModelCore::attention_backward(const View& dqkv, const View& dout, const View& out, const View& qkv,
                                   ActivationPlan::Handle saved, ActivationPlan::Handle scratch, int B, int T,
                                   int NH, bool causal, const View& cu_seqlens, int kv_heads) {
  be_->attention_backward({dqkv, dout, out, qkv, acts_.work(saved), acts_.work(scratch), B, T, NH, at_, causal,
                           cu_seqlens, kv_heads});
}

}  // namespace mptrain
