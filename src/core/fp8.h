// The two OCP FP8 formats (issue 57's storage, ../shared/REFERENCE.md "FP8"), as raw 8-bit
// patterns with exact conversions usable on the host and in CUDA kernels:
//   E4M3 ("e4m3fn"): sign, 4 exponent bits (bias 7), 3 mantissa bits; largest ±448, smallest
//        normal 2^-6, smallest subnormal 2^-9; no infinities, NaN = S.1111.111.
//   E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits; largest ±57,344, smallest normal
//        2^-14, smallest subnormal 2^-16; IEEE-style ±inf (S.11111.00) and NaNs.
// From fp32: round to nearest, ties to even, subnormals included; NaN stays NaN (its sign kept).
// A value whose rounding lands past the largest finite one saturates to it in the scaled cast
// (Transformer Engine's and torchao's choice, `saturate`), infinities included; without
// saturation it becomes E5M2's infinity or E4M3's NaN (it has no infinity). Written by hand for the
// reasons dtype.h gives for bf16 and fp16: identical bits on host and device, constexpr-friendly,
// tested against a float64 quantizer on every edge the formats have (tests/core/test_fp8.cpp).
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace mptrain {

enum class Fp8Format { E4M3, E5M2 };

struct Fp8Spec {
  int exponent_bits, mantissa_bits, bias;
  uint8_t max_code;  // the largest finite magnitude's pattern (sign clear)
  uint8_t nan_code;  // the quiet NaN this cast writes (sign clear)
  bool has_inf;      // E5M2: S.11111.00 is ±inf
  float max_value;
};

MPT_HD Fp8Spec fp8_spec(Fp8Format f) {
  return f == Fp8Format::E4M3 ? Fp8Spec{4, 3, 7, 0x7e, 0x7f, false, 448.0f}
                              : Fp8Spec{5, 2, 15, 0x7b, 0x7e, true, 57344.0f};
}

inline const char* fp8_name(Fp8Format f) { return f == Fp8Format::E4M3 ? "e4m3" : "e5m2"; }

// fp32 → the format's pattern (see above).
MPT_HD uint8_t fp8_from_f32(float x, Fp8Format format, bool saturate = true) {
  const Fp8Spec s = fp8_spec(format);
  const uint32_t u = f32_bits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  const uint8_t overflow = saturate    ? s.max_code
                           : s.has_inf ? static_cast<uint8_t>(s.max_code + 1)
                                       : s.nan_code;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | s.nan_code);
  if (a == 0x7f800000u) return static_cast<uint8_t>(sign | overflow);
  if (a < 0x00800000u) return sign;               // zero, or an fp32 subnormal: far below half of 2^-16
  const int e = static_cast<int>(a >> 23) - 127;  // x = 1.m · 2^e
  const int min_normal = 1 - s.bias;
  const int max_exponent = (1 << s.exponent_bits) - 1 - s.bias;  // the all-ones exponent's (E4M3's holds 448)
  if (e > max_exponent) return static_cast<uint8_t>(sign | overflow);
  // The 24-bit significand (implicit 1 included) shifted down to the format's grid: M bits below
  // the point for a normal, fewer for a subnormal (the grid is 2^(min_normal - M) there).
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const int shift = 23 - s.mantissa_bits + (e < min_normal ? min_normal - e : 0);
  if (shift > 25) return sign;  // below half the smallest subnormal
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // to nearest, ties to even
  // A normal's code: the biased exponent above the mantissa; a rounding carry moves into the
  // exponent, and a subnormal's carry into the smallest normal, by plain addition.
  const uint32_t code =
      e >= min_normal ? (static_cast<uint32_t>(e + s.bias) << s.mantissa_bits) + q - (1u << s.mantissa_bits)
                      : q;
  if (code > s.max_code) return static_cast<uint8_t>(sign | overflow);
  return static_cast<uint8_t>(sign | code);
}

// The format's pattern → fp32 (exact: every FP8 value is an fp32 value).
MPT_HD float fp8_to_f32(uint8_t bits, Fp8Format format) {
  const Fp8Spec s = fp8_spec(format);
  const bool negative = (bits & 0x80u) != 0;
  const uint32_t magnitude = bits & 0x7fu;
  const uint32_t exp = magnitude >> s.mantissa_bits, mant = magnitude & ((1u << s.mantissa_bits) - 1u);
  const uint32_t all_ones = (1u << s.exponent_bits) - 1u;
  uint32_t out;
  if (!s.has_inf && magnitude == 0x7fu) {
    out = 0x7fc00000u;  // E4M3's NaN
  } else if (s.has_inf && exp == all_ones) {
    out = mant == 0 ? 0x7f800000u : 0x7fc00000u;
  } else if (exp == 0) {  // zero or subnormal: mant · 2^(1 - bias - M), exact in fp32
    const float v = static_cast<float>(mant) *
                    f32_from_bits(static_cast<uint32_t>(127 + 1 - s.bias - s.mantissa_bits) << 23);
    out = f32_bits(v);
  } else {
    out = ((exp + 127u - static_cast<uint32_t>(s.bias)) << 23) | (mant << (23 - s.mantissa_bits));
  }
  return f32_from_bits(out | (negative ? 0x80000000u : 0u));
}

// x rounded to the format and back: the value an FP8 operand holds, in fp32.
MPT_HD float fp8_round(float x, Fp8Format format, bool saturate = true) {
  return fp8_to_f32(fp8_from_f32(x, format, saturate), format);
}

}  // namespace mptrain
