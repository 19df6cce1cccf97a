// The policy's questions to the backend and the refusals (model/policy_backend.h).
#include "model/policy_backend.h"

#include <initializer_list>
#include <string>

#include "core/error.h"

namespace mptrain {

AttentionDtypes attention_dtypes(const Policy& policy) {
  return {policy.rule(OpKind::Linear).output, policy.rule(OpKind::Softmax).saved,
          policy.rule(OpKind::AttnValues).output, policy.rule(OpKind::AttnScores).compute,
          policy.rule(OpKind::AttnValues).compute};
}

namespace {

// Throws the refusal unless be.supports(op, types, math); names the tensors as the backend's own
// refusal does.
void need(const Backend& be, Op op, std::initializer_list<StorageType> types,
          ComputeType math = ComputeType::F32) {
  if (be.supports(op, types, math)) return;
  throw Error(std::string("[precision] the ") + be.name() + " backend has no " + backend_op_name(op) +
              " kernel for " + describe_dtypes(op, std::vector<StorageType>(types), math) +
              " (the policy's dtypes; see mptrain explain)");
}

}  // namespace

void check_policy_supported(const Policy& policy, const Backend& be) {
  const OpRule &lin = policy.rule(OpKind::Linear), &head = policy.rule(OpKind::LmHead),
               &ln = policy.rule(OpKind::LayerNorm), &gelu = policy.rule(OpKind::Gelu);
  const StorageType w = policy.operand(OpKind::Linear), hw = policy.operand(OpKind::LmHead);
  const StorageType stream = policy.residual_stream, small = policy.small_weights,
                    dact = policy.activation_grads, dw = policy.weight_grads;
  need(be, Op::ToOperand, {w, StorageType::F32}, lin.compute);
  need(be, Op::ToOperand, {hw, StorageType::F32}, head.compute);
  need(be, Op::Embedding, {stream, small});
  need(be, Op::LayerNorm, {ln.output, stream, small});
  need(be, Op::Linear, {lin.output, ln.output, w}, lin.compute);
  need(be, Op::LinearActivation, {gelu.output, ln.output, w, lin.output},
       lin.compute);
  need(be, Op::LinearResidual, {stream, gelu.output, w, stream}, lin.compute);
  const AttentionDtypes at = attention_dtypes(policy);
  need(be, Op::Attention, {at.qkv, at.probs, at.out}, at.scores);
  need(be, Op::AttentionBackward, {at.qkv, at.probs, at.out}, at.scores);
  need(be, Op::Linear, {policy.logits, ln.output, hw}, head.compute);
  need(be, Op::CrossEntropy, {policy.dlogits, policy.logits});
  need(be, Op::LinearBackward, {dact, dw, policy.dlogits, ln.output, hw},
       head.compute);
  need(be, Op::LinearBackward, {dact, dw, dact, gelu.output, w}, lin.compute);
  need(be, Op::LinearActivationBackward, {dact, dw, dact, ln.output, w, lin.output}, lin.compute);
  need(be, Op::LayerNormBackward, {dact, dw, dact, stream, small});
  need(be, Op::EmbeddingBackward, {dw, dact});
  if (dw != StorageType::F32) need(be, Op::Accumulate, {StorageType::F32, dw});
}

size_t lowp_grad_floats(size_t num_params, const Policy& policy) {
  if (policy.weight_grads == StorageType::F32) return 0;
  return (num_params * storage_bytes(policy.weight_grads) + sizeof(float) - 1) / sizeof(float);
}

}  // namespace mptrain
