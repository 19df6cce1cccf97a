// FP8's casts and amax on the GPU (the contract of the Backend's fp8_cast and amax, issue 57):
// device pointers, asynchronous on ctx's stream.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cuda/context.h"
#include "core/fp8.h"

namespace mptrain::cuda {

// out[i] = fp8_round(x[i]·scale) in T (core/fp8.h's rounding, the CPU's bits); out may alias x.
template <class T>
void fp8_cast(T* out, const T* x, size_t n, float scale, Fp8Format format, bool saturate, Context& ctx);

// *amax_bits (device) = the largest |x[i]|'s fp32 pattern (NaN's above every finite one, and
// inf's): a maximum, so the order of the reduction changes nothing.
void amax_bits(uint32_t* amax_bits, const float* x, size_t n, Context& ctx);

}  // namespace mptrain::cuda
