// Private to the CPU backend: conversions between fp32 and the 16-bit storage types over short
// spans, and the dtype-dispatch helper the typed ops use.
//
// The typed ops work in chunks: widen a chunk of 16-bit input into an fp32 array on the stack,
// run the fp32 math (which g++ vectorises), narrow the result. The span conversions are
// bit-identical to core/dtype.h's scalar ones (round to nearest even, subnormals, inf, NaN;
// tests/precision/test_convert.cpp checks all 65536 patterns and a sweep of fp32 values;
// one exception: VCVTPH2PS quiets a signalling fp16 NaN, which the scalar widening keeps):
//   bf16: integer RNE on the fp32 bits, written branch-free so that g++ vectorises it
//         (VCVTNEPS2BF16 would be one instruction, but it flushes subnormal inputs to zero);
//   fp16: VCVTPS2PH / VCVTPH2PS (IEEE conversions with RNE) where AVX-512 is compiled in,
//         dtype.h's scalar functions otherwise and for the tails. (The masked forms with a zero
//         source sidestep GCC 12's false -Wmaybe-uninitialized inside the unmasked intrinsics.)
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/dtype.h"

namespace mptrain::cpu {

// f(T{}) with T = float, Bf16 or Fp16 for the storage type t.
template <class F>
decltype(auto) dispatch_storage(StorageType t, F&& f) {
  switch (t) {
    case StorageType::BF16:
      return f(Bf16{});
    case StorageType::F16:
      return f(Fp16{});
    case StorageType::F32:
    case StorageType::I32:
      break;
  }
  return f(float{});
}

inline void widen_span(float* dst, const float* src, size_t n) {
  if (dst != src)
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}
inline void widen_span(float* dst, const Bf16* src, size_t n) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  for (size_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(static_cast<uint32_t>(s[i]) << 16);
}
inline void widen_span(float* dst, const Fp16* src, size_t n) {
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i,
                     _mm512_mask_cvtph_ps(_mm512_setzero_ps(), 0xffff,
                                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

inline void narrow_span(float* dst, const float* src, size_t n) { widen_span(dst, src, n); }
inline void narrow_span(Bf16* dst, const float* src, size_t n) {
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(src[i]);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    d[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}
inline void narrow_span(Fp16* dst, const float* src, size_t n) {
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_mask_cvtps_ph(_mm256_setzero_si256(), 0xffff, _mm512_loadu_ps(src + i),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

// dst = round_to_tf32(src) (dst may alias src); branch-free so that it vectorises.
inline void tf32_span(float* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(src[i]);
    const uint32_t r = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
    dst[i] = std::bit_cast<float>((u & 0x7f800000u) == 0x7f800000u ? u : r);
  }
}

// Elements per chunk of the typed elementwise ops: 4 KiB of fp32 per array, in L1.
constexpr size_t kChunk = 1024;

// The loop every typed unary op shares: out (dtype to) = f over inp (dtype ti), in parallel
// chunks of kChunk: widen the chunk into fp32 on the stack, f(x, i0, len) transforms x[0, len)
// in place (i0 = the chunk's first element, for ops that also read an fp32 operand such as a
// gradient), narrow once. f runs concurrently on distinct chunks.
template <class F>
void map_chunks_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N, F&& f) {
  const std::ptrdiff_t chunks = static_cast<std::ptrdiff_t>((N + kChunk - 1) / kChunk);
  const size_t eo = storage_bytes(to), ei = storage_bytes(ti);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t c = 0; c < chunks; ++c) {
    const size_t i0 = static_cast<size_t>(c) * kChunk, len = std::min(kChunk, N - i0);
    float x[kChunk];
    dispatch_storage(ti, [&](auto t) {
      widen_span(x, reinterpret_cast<const decltype(t)*>(static_cast<const char*>(inp) + i0 * ei), len);
    });
    f(x, i0, len);
    dispatch_storage(to, [&](auto t) {
      narrow_span(reinterpret_cast<decltype(t)*>(static_cast<char*>(out) + i0 * eo), x, len);
    });
  }
}

}  // namespace mptrain::cpu
