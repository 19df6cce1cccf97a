// The policy's questions to the backend and the refusals (model/policy_backend.h).
#include "model/policy_backend.h"

#include <string>
#include <utility>

#include "core/error.h"

namespace mptrain {

AttentionDtypes attention_dtypes(const Policy& policy) {
  return {policy.rule(OpKind::Linear).output, policy.rule(OpKind::Softmax).saved,
          policy.rule(OpKind::AttnValues).output, policy.rule(OpKind::AttnScores).compute,
          policy.rule(OpKind::AttnValues).compute};
}

void check_cpu_runs(const Policy& policy) {
  const std::pair<const char*, StorageType> between[] = {{"residual stream", policy.residual_stream},
                                                         {"logits", policy.logits},
                                                         {"activation gradients", policy.activation_grads},
                                                         {"weight gradients", policy.weight_grads},
                                                         {"non-GEMM weights", policy.small_weights}};
  for (const auto& [what, t] : between)
    if (t != StorageType::F32)
      throw Error(std::string("[precision] the CPU models keep the ") + what + " in fp32, not " +
                  storage_name(t));
}

void check_operands_supported(const Policy& policy, const Backend& be) {
  for (OpKind op : {OpKind::Linear, OpKind::AttnScores, OpKind::AttnValues, OpKind::LmHead}) {
    const ComputeType c = policy.rule(op).compute;
    if (policy.operand(op) != be.operand_storage(c))
      throw Error(std::string("[precision] ") + op_name(op) + ": the policy multiplies " + compute_name(c) +
                  " on " + storage_name(policy.operand(op)) + " operands, the " + be.name() + " backend on " +
                  storage_name(be.operand_storage(c)) +
                  " (make the policy with this backend's capabilities)");
  }
}

}  // namespace mptrain
