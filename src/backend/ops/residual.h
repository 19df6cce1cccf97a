// Elementwise sum for the residual stream.
#pragma once
#include <cstddef>

namespace mptrain::cpu {

// out[i] = a[i] + b[i]   (out may alias a or b).
void residual_forward(float* out, const float* a, const float* b, size_t N);

// dst[i] += src[i]: the backward of a residual connection (gradient flows to both inputs).
void accumulate(float* dst, const float* src, size_t N);

}  // namespace mptrain::cpu
