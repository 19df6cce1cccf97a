// Casts between fp32 and the 16-bit storage types on the GPU (the same rounding as the
// host conversions of core/dtype.h, so CPU and GPU agree bit for bit).
#pragma once
#include <cstddef>

#include "core/dtype.h"

namespace mptrain::cuda {

// All pointers are device pointers; `stream` is a cudaStream_t (void* keeps CUDA headers out).
void cast_f32_to_bf16(Bf16* out, const float* in, size_t n, void* stream);
void cast_bf16_to_f32(float* out, const Bf16* in, size_t n, void* stream);
void cast_f32_to_f16(Fp16* out, const float* in, size_t n, void* stream);
void cast_f16_to_f32(float* out, const Fp16* in, size_t n, void* stream);

}  // namespace mptrain::cuda
