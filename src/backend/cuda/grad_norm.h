// Global gradient norm on the GPU (src/optim/grad_norm.h's global_norm, and the clip factor
// of clip_grad_norm), deterministic: a fixed grid of partial sums in double, then one block
// adds the partials in a fixed order. Results stay on the device (no host sync), where
// adamw_update's grad_scale reads the clip factor.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// Doubles of device scratch grad_norm needs.
size_t grad_norm_scratch_doubles();

// norm (=, device double) = sqrt(Σ grads[i]²), summed in double.
// clip (nullable, =, device float) = min(1, max_norm / (norm + 1e-6)), and 1 when max_norm <= 0
// (torch.nn.utils.clip_grad_norm_'s rule, as cpu clip_grad_norm).
void grad_norm(double* norm, float* clip, const float* grads, size_t n, float max_norm, double* scratch,
               Context& ctx);

}  // namespace mptrain::cuda
