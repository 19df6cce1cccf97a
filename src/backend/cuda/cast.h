// Casts between fp32 and the 16-bit storage types on the GPU (the same rounding as the
// host conversions of core/dtype.h, so CPU and GPU agree bit for bit).
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"
#include "core/dtype.h"

namespace mptrain::cuda {

// out[i] = in[i] converted, for (Out, In) one of (Bf16, float), (float, Bf16), (Fp16, float),
// (float, Fp16). Device pointers; `stream` is a cudaStream_t (void* keeps CUDA headers out).
template <class Out, class In>
void cast(Out* out, const In* in, size_t n, void* stream);

// out[i] = in[i] rounded to TF32 (core/dtype.h's round_to_tf32: what the CPU's TF32 products
// read); out may alias in. An elementwise map (elementwise.cuh) on ctx's stream.
void round_tf32(float* out, const float* in, size_t n, Context& ctx);

}  // namespace mptrain::cuda
