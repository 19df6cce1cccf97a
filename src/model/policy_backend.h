// What a model asks of the backend under its precision policy, in one place: the attention's
// dtypes as the op interface takes them, and the checks that refuse, when the model is built, a
// policy the backend cannot run (one line naming the op or tensor and the dtypes).
#pragma once
#include "backend/backend.h"
#include "precision/policy.h"

namespace mptrain {

// The attention's dtypes and arithmetic under `policy`, as the op interface takes them.
AttentionDtypes attention_dtypes(const Policy& policy);
// Throws Error when the policy keeps a tensor between ops in a dtype the models do not run yet:
// the residual stream, logits, activation and weight gradients and non-GEMM weights are fp32
// (the fused cross-entropy reads fp32 logits and writes dlogits in place).
void check_cpu_runs(const Policy& policy);
// Throws Error when the policy's GEMM operand storages are not what the backend multiplies (a
// policy made for other capabilities than be.caps()).
void check_operands_supported(const Policy& policy, const Backend& be);

}  // namespace mptrain
