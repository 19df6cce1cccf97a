// FP8's kernels on the CPU (backend/backend.h's fp8_cast and amax, issue 57): the emulation's
// scaled cast, value by value with core/fp8.h's rounding, and the amax a scale is made from.
#pragma once
#include <cstddef>

#include "core/fp8.h"

namespace mptrain::cpu {

// out[i] = fp8_round(x[i]·scale) (out may alias x).
void fp8_cast(float* out, const float* x, size_t n, float scale, Fp8Format format, bool saturate);
// The largest |x[i]| over n values (NaN if any is NaN, inf if any is infinite; 0 for n = 0).
float amax(const float* x, size_t n);

}  // namespace mptrain::cpu
