// The policy's questions to the backend and the refusals (model/policy_backend.h).
#include "model/policy_backend.h"

#include <string>

#include "core/error.h"

namespace mptrain {

AttentionDtypes attention_dtypes(const Policy& policy) {
  return {policy.rule(OpRole::Linear).output, policy.rule(OpRole::Softmax).saved,
          policy.rule(OpRole::AttnValues).output, policy.rule(OpRole::AttnScores).compute,
          policy.rule(OpRole::AttnValues).compute};
}

namespace {

// Throws the refusal unless be.supports(a); names the tensors as the backend's own refusal does.
template <class A>
void need(const Backend& be, const A& a) {
  if (be.supports(a)) return;
  const OpTypes t = op_types(a);
  throw Error(std::string("[precision] the ") + be.name() + " backend has no " + backend_op_name(t.op) +
              " kernel for " + t.describe() + " (the policy's dtypes; see mptrain explain)");
}

}  // namespace

// Each op of a transformer's pass asked with the arguments the models give it, as placeholders
// of the policy's dtypes (View::dtype_only).
void check_policy_supported(const Policy& policy, const Backend& be) {
  const auto like = [](StorageType t) { return View::dtype_only(t); };
  const OpRule &lin = policy.rule(OpRole::Linear), &head = policy.rule(OpRole::LmHead),
               &ln = policy.rule(OpRole::LayerNorm), &gelu = policy.rule(OpRole::Gelu);
  const View w = like(policy.operand(OpRole::Linear)), hw = like(policy.operand(OpRole::LmHead));
  const View f32 = like(StorageType::F32), stream = like(policy.residual_stream),
             small = like(policy.small_weights), dact = like(policy.activation_grads),
             dw = like(policy.weight_grads), normed = like(ln.output), lin_out = like(lin.output),
             gelu_out = like(gelu.output), logits = like(policy.logits), dlogits = like(policy.dlogits);
  need(be, ToOperandArgs{w, f32, lin.compute});
  need(be, ToOperandArgs{hw, f32, head.compute});
  need(be, EmbeddingArgs{.out = stream, .word = small, .pos = small});
  need(be, LayerNormArgs{.out = normed, .x = stream, .gamma = small, .beta = small});
  need(be, LinearArgs{.out = lin_out, .x = normed, .w = w, .bias = small, .math = lin.compute});
  need(be, LinearArgs{.out = gelu_out,
                      .x = normed,
                      .w = w,
                      .bias = small,
                      .math = lin.compute,
                      .epilogue = Epilogue::BiasGelu,
                      .pre = lin_out});
  need(be, LinearArgs{.out = stream,
                      .x = gelu_out,
                      .w = w,
                      .bias = small,
                      .math = lin.compute,
                      .epilogue = Epilogue::BiasResidual,
                      .residual = stream});
  const AttentionDtypes at = attention_dtypes(policy);
  need(be, AttentionArgs{.out = like(at.out), .qkv = like(at.qkv), .types = at});
  need(
      be,
      AttentionBackwardArgs{
          .dqkv = like(at.qkv), .dout = like(at.out), .out = like(at.out), .qkv = like(at.qkv), .types = at});
  need(be, LinearArgs{.out = logits, .x = normed, .w = hw, .math = head.compute});
  need(be, CrossEntropyArgs{.dlogits = dlogits, .logits = logits});
  need(be,
       LinearBackwardArgs{.dx = dact, .dw = dw, .dy = dlogits, .x = normed, .w = hw, .math = head.compute});
  need(be, LinearBackwardArgs{
               .dx = dact, .dw = dw, .db = dw, .dy = dact, .x = gelu_out, .w = w, .math = lin.compute});
  if (policy.caps.lowp_between_ops)  // GELU's derivative in the down projection's dx (gpt2_pass.cpp)
    need(be, LinearBackwardArgs{.dx = dact,
                                .dw = dw,
                                .db = dw,
                                .dy = dact,
                                .x = gelu_out,
                                .w = w,
                                .math = lin.compute,
                                .x_epilogue = Epilogue::BiasGelu,
                                .x_pre = lin_out});
  need(be, LinearBackwardArgs{.dx = dact,
                              .dw = dw,
                              .db = dw,
                              .dy = dact,
                              .x = normed,
                              .w = w,
                              .math = lin.compute,
                              .epilogue = Epilogue::BiasGelu,
                              .pre = lin_out});
  need(be, LayerNormBackwardArgs{
               .dx = dact, .dgamma = dw, .dbeta = dw, .dout = dact, .x = stream, .gamma = small});
  need(be, EmbeddingBackwardArgs{.dword = dw, .dpos = dw, .dout = dact});
  if (policy.weight_grads != StorageType::F32) need(be, AccumulateArgs{f32, dw});
}

size_t lowp_grad_floats(size_t num_params, const Policy& policy) {
  if (policy.weight_grads == StorageType::F32) return 0;
  return (num_params * storage_bytes(policy.weight_grads) + sizeof(float) - 1) / sizeof(float);
}

}  // namespace mptrain
