// Conversions fp32 <-> bf16 / fp16, exhaustive over all 65536 patterns of each 16-bit
// type, plus rounding (ties to even), overflow, subnormals and NaN on edge values.
// fp16 is checked against GCC's _Float16 (libgcc's conversion), an independent reference.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/dtype.h"
#include "core/rng.h"

namespace mptrain {
namespace {

bool is_nan16(uint16_t b, int exp_bits) {
  const int mant_bits = 15 - exp_bits;
  const uint16_t exp_mask = static_cast<uint16_t>(((1u << exp_bits) - 1) << mant_bits);
  return (b & exp_mask) == exp_mask && (b & ((1u << mant_bits) - 1)) != 0;
}

TEST(Dtype, Bf16AllPatternsRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_f32(Bf16{static_cast<uint16_t>(b)});
    const uint16_t back = f32_to_bf16(f).bits;
    if (is_nan16(static_cast<uint16_t>(b), 8)) {
      ASSERT_TRUE(std::isnan(f));
      ASSERT_TRUE(is_nan16(back, 8));
      ASSERT_EQ(back & 0x8000, b & 0x8000);
    } else {
      ASSERT_EQ(back, b) << std::hex << b;
    }
  }
}

TEST(Dtype, Fp16AllPatternsRoundTripAndMatchFloat16) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float f = f16_to_f32(Fp16{bits});
    _Float16 ref;
    std::memcpy(&ref, &bits, 2);
    if (is_nan16(bits, 5)) {
      ASSERT_TRUE(std::isnan(f));
      ASSERT_TRUE(is_nan16(f32_to_f16(f).bits, 5));
      continue;
    }
    ASSERT_EQ(f32_bits(f), f32_bits(static_cast<float>(ref))) << std::hex << b;
    ASSERT_EQ(f32_to_f16(f).bits, bits) << std::hex << b;
  }
}

// The nearest bf16 by brute force in double, ties to the even pattern.
uint16_t nearest_bf16(float f) {
  const uint16_t lo = static_cast<uint16_t>(f32_bits(f) >> 16);
  uint16_t best = lo;
  double best_d = std::numeric_limits<double>::infinity();
  for (uint16_t cand : {lo, static_cast<uint16_t>(lo + 1)}) {
    const double d = std::fabs(static_cast<double>(bf16_to_f32(Bf16{cand})) - f);
    if (d < best_d || (d == best_d && (cand & 1) == 0)) {
      best = cand;
      best_d = d;
    }
  }
  return best;
}

TEST(Dtype, Fp32ToBf16IsNearestEven) {
  for (uint64_t i = 0; i < 2000000; ++i) {
    uint32_t u = static_cast<uint32_t>(mix64(i));
    if ((u & 0x7f800000u) == 0x7f800000u) continue;  // inf/NaN covered elsewhere
    const float f = f32_from_bits(u);
    if (std::fabs(f) > 3.38e38f) continue;  // overflow region checked below
    ASSERT_EQ(f32_to_bf16(f).bits, nearest_bf16(f)) << std::hex << u;
  }
}

TEST(Dtype, Fp32ToFp16MatchesFloat16OnRandomAndEdgeValues) {
  auto check = [](float f) {
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    const uint16_t ours = f32_to_f16(f).bits;
    if (std::isnan(f)) {
      ASSERT_TRUE(is_nan16(ours, 5));
      return;
    }
    ASSERT_EQ(ours, rb) << f << " bits " << std::hex << f32_bits(f);
  };
  for (uint64_t i = 0; i < 2000000; ++i) check(f32_from_bits(static_cast<uint32_t>(mix64(i + 99))));
  // Every fp32 value around the fp16 subnormal/normal boundary and the overflow threshold.
  for (uint32_t u = 0x387fc000u; u < 0x38804000u; ++u) check(f32_from_bits(u));
  for (uint32_t u = 0x477fe000u; u < 0x47800100u; ++u) check(f32_from_bits(u));
  for (uint32_t u = 0x33000000u - 0x1000; u < 0x33800000u + 0x1000; ++u) check(f32_from_bits(u));  // near 2^-25
}

TEST(Dtype, EdgeValues) {
  // ties: 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125 → even (1.0)
  EXPECT_EQ(f32_to_bf16(1.00390625f).bits, 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.01171875f).bits, 0x3f82);  // halfway above an odd pattern → up
  EXPECT_EQ(f32_to_f16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.0f).bits, 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f).bits, 0x7c00);  // overflow rounds to inf
  EXPECT_EQ(f32_to_f16(-1e6f).bits, 0xfc00);
  EXPECT_EQ(f32_to_f16(5.9604644775390625e-8f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(2.98023223876953125e-8f).bits, 0x0000);  // half of it: tie to even → 0
  EXPECT_EQ(f32_to_f16(-0.0f).bits, 0x8000);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()).bits, 0x7f80);  // rounds up to inf
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
  EXPECT_EQ(round_to_tf32(1.0f + 1.0f / 2048), 1.0f);  // tie → even
  EXPECT_EQ(round_to_tf32(1.0f + 3.0f / 2048), 1.0f + 2.0f / 1024);
}

}  // namespace
}  // namespace mptrain
