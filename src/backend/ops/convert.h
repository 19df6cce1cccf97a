// Dtype conversions over flat buffers: fp32 <-> bf16 / fp16 with round to nearest even
// (bit-identical to core/dtype.h's scalar conversions).
#pragma once
#include <cstddef>

#include "core/dtype.h"

namespace mptrain::cpu {

// dst[i] (dtype dt) = src[i] (dtype st) for i < n; a 16-bit to 16-bit conversion goes through
// fp32 (exact widening, one rounding). dst may equal src only when dt == st (then a no-op).
void convert(void* dst, StorageType dt, const void* src, StorageType st, size_t n);

}  // namespace mptrain::cpu
