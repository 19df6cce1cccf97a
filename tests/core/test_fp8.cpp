// The FP8 formats (core/fp8.h) against a float64 quantizer written from the formats' definition
// (tests/common/fp8_reference.h), on the edges the formats have: ±0, subnormals and the smallest
// one's half, ties between neighbours, the largest value and the tie just above it, ±inf, NaN;
// and the per-tensor scaling (precision/fp8_scaling.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backend/ops/fp8.h"
#include "common/fp8_reference.h"
#include "core/error.h"
#include "core/fp8.h"
#include "precision/fp8_scaling.h"

namespace mptrain {
namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::E4M3, Fp8Format::E5M2};

using test::fp8_finite_values;
using test::fp8_reference_code;

// What the cast must give for x: the reference's pattern with x's sign, or on overflow the
// largest value (saturating), E5M2's infinity or E4M3's NaN.
uint8_t expected(float x, Fp8Format f, bool saturate) {
  const Fp8Spec s = fp8_spec(f);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | s.nan_code);
  const int code = std::isinf(x) ? -1 : fp8_reference_code(x, f);
  if (code >= 0) return static_cast<uint8_t>(sign | code);
  return static_cast<uint8_t>(sign | (saturate ? s.max_code : s.has_inf ? s.max_code + 1 : s.nan_code));
}

// The edges: each value, the midpoints between neighbours (ties) and one fp32 step either side,
// the smallest subnormal's half and neighbours, the largest value's tie above it, zeros,
// infinities, NaN, fp32 subnormals; and log-uniform values across the whole range, both signs.
std::vector<float> edge_values(Fp8Format f) {
  const std::vector<double> v = fp8_finite_values(f);
  std::vector<float> out = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min(),
                            1e-30f,
                            1e30f};
  const double next = v.back() + (v.back() - v[v.size() - 2]);
  std::vector<double> points(v.begin(), v.end());
  for (size_t i = 0; i + 1 < v.size(); ++i) points.push_back((v[i] + v[i + 1]) / 2);
  points.push_back((v.back() + next) / 2);
  points.push_back(next);
  points.push_back(v[1] / 2);
  points.push_back(v[1] / 4);
  for (const double p : points) {
    const float x = static_cast<float>(p);
    for (const float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, 1e38f)}) {
      out.push_back(y);
      out.push_back(-y);
    }
  }
  std::mt19937 rng(57);
  std::uniform_real_distribution<double> log2_of(-20.0, 18.0);
  for (int i = 0; i < 20000; ++i) {
    const float x = static_cast<float>(std::exp2(log2_of(rng)));
    out.push_back(i % 2 ? -x : x);
  }
  return out;
}

TEST(Fp8, CastsAsTheFloat64QuantizerOnEveryEdge) {
  for (const Fp8Format f : kFormats)
    for (const bool saturate : {true, false})
      for (const float x : edge_values(f)) {
        const uint8_t got = fp8_from_f32(x, f, saturate), want = expected(x, f, saturate);
        ASSERT_EQ(got, want) << fp8_name(f) << (saturate ? " saturating" : "") << ": x = " << x << " ("
                             << std::hexfloat << x << std::defaultfloat << ")";
      }
}

TEST(Fp8, EveryPatternDecodesToItsValueAndBack) {
  for (const Fp8Format f : kFormats) {
    const Fp8Spec s = fp8_spec(f);
    const std::vector<double> v = fp8_finite_values(f);
    for (int bits = 0; bits < 256; ++bits) {
      const uint8_t b = static_cast<uint8_t>(bits);
      const float x = fp8_to_f32(b, f);
      const int magnitude = bits & 0x7f;
      if (magnitude > s.max_code) {  // E4M3's NaN; E5M2's infinities and NaNs
        const bool inf = s.has_inf && magnitude == s.max_code + 1;
        EXPECT_TRUE(inf ? std::isinf(x) : std::isnan(x)) << fp8_name(f) << " pattern " << bits;
        continue;
      }
      EXPECT_EQ(static_cast<double>(std::fabs(x)), v[static_cast<size_t>(magnitude)])
          << fp8_name(f) << " " << bits;
      EXPECT_EQ(std::signbit(x), bits >= 0x80) << fp8_name(f) << " " << bits;
      EXPECT_EQ(fp8_from_f32(x, f), b) << fp8_name(f) << " pattern " << bits << " did not come back";
    }
  }
  // The formats' landmarks (../shared/REFERENCE.md).
  EXPECT_EQ(fp8_to_f32(0x7e, Fp8Format::E4M3), 448.0f);
  EXPECT_EQ(fp8_to_f32(0x01, Fp8Format::E4M3), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_to_f32(0x08, Fp8Format::E4M3), std::ldexp(1.0f, -6));
  EXPECT_EQ(fp8_to_f32(0x7b, Fp8Format::E5M2), 57344.0f);
  EXPECT_EQ(fp8_to_f32(0x01, Fp8Format::E5M2), std::ldexp(1.0f, -16));
  EXPECT_EQ(fp8_to_f32(0x04, Fp8Format::E5M2), std::ldexp(1.0f, -14));
  EXPECT_TRUE(std::isinf(fp8_to_f32(0xfc, Fp8Format::E5M2)) && fp8_to_f32(0xfc, Fp8Format::E5M2) < 0);
}

TEST(Fp8Scaling, ScaleBringsTheAmaxToTheFormatsTopLessTheMargin) {
  EXPECT_EQ(fp8_scale_for(2.0f, Fp8Format::E4M3, 0, 1.0f), 224.0f);
  EXPECT_EQ(fp8_scale_for(2.0f, Fp8Format::E4M3, 1, 1.0f), 112.0f);
  EXPECT_EQ(fp8_scale_for(0.5f, Fp8Format::E5M2, 0, 1.0f), 114688.0f);
  // Nothing to learn from: the previous scale stays.
  EXPECT_EQ(fp8_scale_for(0.0f, Fp8Format::E4M3, 0, 3.0f), 3.0f);
  EXPECT_EQ(fp8_scale_for(std::numeric_limits<float>::infinity(), Fp8Format::E4M3, 0, 3.0f), 3.0f);
  EXPECT_EQ(fp8_scale_for(std::numeric_limits<float>::quiet_NaN(), Fp8Format::E4M3, 0, 3.0f), 3.0f);
  // A tensor cast at its scale: its largest value lands on the format's largest, nothing saturates.
  const std::vector<float> x = {0.1f, -3.7f, 2.5f, 1e-3f};
  const float amax = cpu::amax(x.data(), x.size());
  EXPECT_EQ(amax, 3.7f);
  const float s = fp8_scale_for(amax, Fp8Format::E4M3, 0, 1.0f);
  EXPECT_NEAR(std::fabs(fp8_round(x[1] * s, Fp8Format::E4M3)), 448.0f, 448.0f * 1e-6f);
  const float nan_in[] = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_TRUE(std::isnan(cpu::amax(nan_in, 2)));
}

TEST(Fp8Scaling, DelayedScalingTakesTheLargestAmaxOfItsWindow) {
  Fp8TensorScaling current(Fp8Format::E4M3, 1, 0), delayed(Fp8Format::E4M3, 3, 0);
  for (const float amax : {4.0f, 1.0f, 2.0f}) {
    ASSERT_TRUE(current.update(amax));
    ASSERT_TRUE(delayed.update(amax));
  }
  EXPECT_EQ(current.scale(), 224.0f);  // this step's 2
  EXPECT_EQ(delayed.scale(), 112.0f);  // the window's 4
  ASSERT_TRUE(delayed.update(1.0f));   // 4 leaves the window: max(1, 2, 1)
  EXPECT_EQ(delayed.scale(), 224.0f);
  EXPECT_EQ(delayed.history(), (std::vector<float>{1.0f, 2.0f, 1.0f}));
  // A non-finite amax is refused (the step is skipped) and changes nothing.
  EXPECT_FALSE(delayed.update(std::numeric_limits<float>::infinity()));
  EXPECT_EQ(delayed.scale(), 224.0f);
  EXPECT_EQ(delayed.history().size(), 3u);
  // Restored from a checkpoint: the same next scale.
  Fp8TensorScaling resumed(Fp8Format::E4M3, 3, 0);
  resumed.restore(delayed.history(), delayed.scale());
  ASSERT_TRUE(resumed.update(8.0f));
  ASSERT_TRUE(delayed.update(8.0f));
  EXPECT_EQ(resumed.scale(), delayed.scale());
  EXPECT_THROW(Fp8TensorScaling(Fp8Format::E5M2, 0, 0), Error);
  EXPECT_THROW(resumed.restore({1, 2, 3, 4}, 1.0f), Error);
}

}  // namespace
}  // namespace mptrain
