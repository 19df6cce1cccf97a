// Storage dtypes and their exact conversions, usable on the host and in CUDA kernels.
//
// bf16 (1/8/7) and fp16 (1/5/10) are stored as raw 16-bit patterns (Bf16, Fp16). Conversions
// from fp32 round to nearest, ties to even; they handle subnormals, infinities and NaN
// exactly (NaN stays NaN with its sign, made quiet). Written by hand because they must be
// constexpr-friendly, identical on host and device, and bit-exact (tests cover all 65536
// patterns of each type); the CUDA intrinsics exist only on the device.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#if defined(__CUDACC__)
#define MPT_HD __host__ __device__ __forceinline__
#else
#define MPT_HD inline
#endif

namespace mptrain {

// I32: the op interface's index arrays (token and segment ids, labels, packed offsets, row
// indices, key masks, decay bits), never a tensor's values.
enum class StorageType { F32, BF16, F16, I32 };

inline const char* storage_name(StorageType t) {
  switch (t) {
    case StorageType::F32:
      return "fp32";
    case StorageType::BF16:
      return "bf16";
    case StorageType::F16:
      return "fp16";
    case StorageType::I32:
      return "int32";
  }
  return "?";
}
inline size_t storage_bytes(StorageType t) { return t == StorageType::BF16 || t == StorageType::F16 ? 2 : 4; }

// The arithmetic of a product: the one vocabulary every layer uses for it (the policy's compute
// type, a GEMM's math on either backend). TF32 is a compute mode (fp32 storage, products of
// operands rounded to a 10-bit mantissa), not a storage type, so it has no StorageType.
enum class ComputeType { F32, TF32, BF16, F16 };

inline const char* compute_name(ComputeType t) {
  switch (t) {
    case ComputeType::F32:
      return "fp32";
    case ComputeType::TF32:
      return "tf32";
    case ComputeType::BF16:
      return "bf16";
    case ComputeType::F16:
      return "fp16";
  }
  return "?";
}
// The storage that holds values of a compute type: tf32 → fp32.
inline StorageType compute_storage(ComputeType t) {
  return t == ComputeType::BF16 ? StorageType::BF16 : t == ComputeType::F16 ? StorageType::F16 : StorageType::F32;
}

struct Bf16 {
  uint16_t bits;
};
struct Fp16 {
  uint16_t bits;
};

MPT_HD uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
MPT_HD float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// ---- bf16 -------------------------------------------------------------------
MPT_HD float bf16_to_f32(Bf16 h) { return f32_from_bits(static_cast<uint32_t>(h.bits) << 16); }

MPT_HD Bf16 f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return Bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};  // quiet NaN
  const uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;  // round to nearest even; overflow carries into the exponent (→ inf), as it should
  return Bf16{static_cast<uint16_t>(u >> 16)};
}

// ---- fp16 -------------------------------------------------------------------
MPT_HD float f16_to_f32(Fp16 h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu;
  const uint32_t mant = h.bits & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
  // zero or subnormal: mant · 2^-24, exact in fp32
  const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

MPT_HD Fp16 f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return Fp16{static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu))};  // NaN
  if (x >= 0x477ff000u) return Fp16{static_cast<uint16_t>(sign | 0x7c00u)};  // >= 65520 (and inf) → inf
  if (x >= 0x38800000u) {  // normal in fp16 (>= 2^-14)
    x += 0xfffu + ((x >> 13) & 1u);  // round to nearest even at bit 13
    x -= 112u << 23;                 // exponent bias 127 → 15
    return Fp16{static_cast<uint16_t>(sign | (x >> 13))};
  }
  // Subnormal or zero: adding 0.5 aligns the value's 2^-24 units with fp32's mantissa LSBs,
  // so the hardware's round-to-nearest-even addition does the rounding.
  const float aligned = f32_from_bits(x) + 0.5f;
  return Fp16{static_cast<uint16_t>(sign | (f32_bits(aligned) - 0x3f000000u))};
}

// ---- TF32: fp32 storage, inputs of a product rounded to a 10-bit mantissa ---------
MPT_HD float round_to_tf32(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u) return f;  // inf / NaN unchanged
  u += 0xfffu + ((u >> 13) & 1u);
  return f32_from_bits(u & 0xffffe000u);
}

}  // namespace mptrain
