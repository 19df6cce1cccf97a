// What a model asks of the backend under its precision policy, in one place: the attention's
// dtypes as the op interface takes them, the check that refuses, when the model is built, a
// policy the backend cannot run (one line naming the op and the dtypes), and the 16-bit weight
// gradients a GPU's plan keeps per micro-batch.
#pragma once
#include <cstddef>

#include "backend/backend.h"
#include "precision/policy.h"

namespace mptrain {

// The attention's dtypes and arithmetic under `policy`, as the op interface takes them.
AttentionDtypes attention_dtypes(const Policy& policy);
// Throws Error "[precision] the <backend> backend has no <op> kernel for <tensor>=<dtype> ..."
// when `be` cannot run an op of a transformer's pass in the dtypes the policy gives it (the
// CPU backend runs every policy, a GPU's plan included: backend/cpu/widening.h).
void check_policy_supported(const Policy& policy, const Backend& be);
// Floats of the buffer holding one micro-batch's weight gradients in policy.weight_grads (a
// GPU's plan: 16 bits, widened into the fp32 master gradients after each backward); 0 when the
// pass accumulates into the fp32 masters directly.
size_t lowp_grad_floats(size_t num_params, const Policy& policy);

}  // namespace mptrain
