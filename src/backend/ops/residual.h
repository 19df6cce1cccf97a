// Elementwise sum for the residual stream.
#pragma once
#include <cstddef>

#include "core/dtype.h"

namespace mptrain::cpu {

// out[i] = a[i] + b[i]   (out may alias a or b).
void residual_forward(float* out, const float* a, const float* b, size_t N);

// The residual add after a mixed-precision linear layer, fused with its bias:
//   out[N,OC] = residual[N,OC] + round_to(acc[N,OC] + bias[OC])
// where round_to is the linear's output dtype (autocast: the linear writes bf16, and
// fp32 + bf16 promotes to fp32). out may alias residual or acc.
void residual_bias_forward(float* out, const float* residual, const float* acc, const float* bias, StorageType round_to,
                           int N, int OC);

}  // namespace mptrain::cpu
