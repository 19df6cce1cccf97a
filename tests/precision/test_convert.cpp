// The vectorised span conversions behind every typed op (backend/cpu/lowp.h) and the flat
// convert op are bit-identical to core/dtype.h's exact scalar conversions: all 65536 patterns
// of bf16 and fp16 widened, and a sweep of fp32 patterns (every exponent, ties, subnormals,
// overflow, inf, NaN) narrowed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/lowp.h"
#include "backend/ops/convert.h"
#include "core/dtype.h"

namespace mptrain {
namespace {

std::vector<float> fp32_sweep() {
  std::vector<float> v;
  for (uint64_t u = 0; u < (1ull << 32); u += 0x10001ull * 97)
    v.push_back(f32_from_bits(static_cast<uint32_t>(u)));
  // Ties and neighbours at the bf16 (bit 16), fp16 (bit 13) and TF32 (bit 13) rounding points.
  for (uint32_t base :
       {0x3f800000u, 0x477fe000u, 0x477ff000u, 0x38800000u, 0x33000000u, 0x00000001u, 0x7f7fffffu})
    for (uint32_t d : {0x0u, 0x7fffu, 0x8000u, 0x8001u, 0x18000u, 0xfffu, 0x1000u, 0x1001u, 0x3000u})
      for (uint32_t sign : {0u, 0x80000000u}) v.push_back(f32_from_bits(sign | (base + d)));
  for (uint32_t u : {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffa00000u, 0x80000000u})
    v.push_back(f32_from_bits(u));
  return v;
}

TEST(Convert, WidenAllPatterns) {
  std::vector<Bf16> b(65536);
  std::vector<Fp16> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    b[i].bits = static_cast<uint16_t>(i);
    h[i].bits = static_cast<uint16_t>(i);
  }
  std::vector<float> fb(65536), fh(65536), flat(65536);
  cpu::widen_span(fb.data(), b.data(), b.size());
  cpu::widen_span(fh.data(), h.data(), h.size());
  for (uint32_t i = 0; i < 65536; ++i) {
    ASSERT_EQ(f32_bits(fb[i]), f32_bits(bf16_to_f32(b[i]))) << std::hex << i;
    // VCVTPH2PS quiets a signalling NaN (sets the quiet bit); the scalar widening keeps it, and
    // which one runs depends on the CPU. Both are NaN with the same sign and payload.
    const uint32_t want = f32_bits(f16_to_f32(h[i])), got = f32_bits(fh[i]);
    if (std::isnan(fh[i]))
      ASSERT_TRUE(got == want || got == (want | 0x00400000u)) << std::hex << i;
    else
      ASSERT_EQ(got, want) << std::hex << i;
  }
  cpu::convert(flat.data(), StorageType::F32, h.data(), StorageType::F16, h.size());
  EXPECT_EQ(std::memcmp(flat.data(), fh.data(), flat.size() * 4), 0);
}

TEST(Convert, NarrowMatchesScalarRne) {
  const std::vector<float> v = fp32_sweep();
  std::vector<Bf16> b(v.size());
  std::vector<Fp16> h(v.size());
  std::vector<float> t(v.size());
  cpu::narrow_span(b.data(), v.data(), v.size());
  cpu::narrow_span(h.data(), v.data(), v.size());
  cpu::tf32_span(t.data(), v.data(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(b[i].bits, f32_to_bf16(v[i]).bits) << std::hex << f32_bits(v[i]);
    ASSERT_EQ(h[i].bits, f32_to_f16(v[i]).bits) << std::hex << f32_bits(v[i]);
    ASSERT_EQ(f32_bits(t[i]), f32_bits(round_to_tf32(v[i]))) << std::hex << f32_bits(v[i]);
  }
  // The parallel flat op gives the same bits, also 16-bit to 16-bit (through fp32).
  std::vector<Bf16> b2(v.size());
  std::vector<Fp16> h2(v.size());
  cpu::convert(b2.data(), StorageType::BF16, v.data(), StorageType::F32, v.size());
  cpu::convert(h2.data(), StorageType::F16, b2.data(), StorageType::BF16, v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(b2[i].bits, b[i].bits);
    ASSERT_EQ(h2[i].bits, f32_to_f16(bf16_to_f32(b[i])).bits);
  }
}

}  // namespace
}  // namespace mptrain
