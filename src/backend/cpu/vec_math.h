// Private to the CPU backend: an exp and an erfc that g++ can vectorise. A scalar libm call in
// the softmax, cross-entropy and GELU loops would cost more than everything else in those loops
// together (issue 23's profile: BERT's exact-GELU epilogue ran at 17 ns an element on scalar erff,
// 1.2 with libmvec's).
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

// glibc's libmvec (2.35 on, x86-64) has vector erfcf — within 1.5 ulp of the true value, AVX2 and
// AVX-512 forms alike, measured over [-7, 7] — but math.h declares its simd variants only under
// -ffast-math. Redeclaring erfcf with GCC's simd attribute is what math.h would do: loops that
// call it under `omp simd` then call _ZGVdN8v_erfcf (AVX2) or _ZGVeN16v_erfcf (AVX-512). Without
// libmvec (CMakeLists.txt links it where found), glibc or GCC, the declaration is skipped and
// erfcf stays scalar. (Not erff: its AVX-512 form saturates to -1 from x ≈ -3.6, 3.9 ulp.)
#if defined(MPTRAIN_HAVE_LIBMVEC) && defined(__GLIBC__) && defined(__x86_64__) && defined(__GNUC__) && \
    !defined(__clang__)
#if __GLIBC_PREREQ(2, 35)
extern "C" float erfcf(float) noexcept __attribute__((simd("notinbranch")));
#endif
#endif

namespace mptrain::cpu {

// exp(x) in float, relative error within ~2 ulp of expf on [-87, 88]; 0 below -87, clamps to
// exp(88) above 88 (callers never exceed it: softmax arguments are <= 0). NaN stays NaN.
// Method: x = n·ln2 + r with |r| <= ln2/2 (Cody–Waite split of ln2 so n·ln2_hi is exact),
// e^r by its degree-7 Taylor polynomial (truncation error < 6e-9), 2^n built in the exponent bits.
inline float vexp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // 12 trailing zero bits: n·kLn2Hi is exact for |n| < 2^12
  constexpr float kLn2Lo = 1.42860682030941723e-6f;
  constexpr float kShifter = 12582912.0f;  // 1.5·2^23: adding then subtracting it rounds to an integer
  float xc = x < -87.0f ? -87.0f : x;
  xc = xc > 88.0f ? 88.0f : xc;
  float n = (xc * kLog2e + kShifter) - kShifter;
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float y = p * std::bit_cast<float>(bits);
  return x < -87.0f ? 0.0f : y;
}

// erfc(x) in float: libmvec's vector erfcf where the loop vectorises (see above), libm's otherwise.
inline float verfc(float x) { return erfcf(x); }

}  // namespace mptrain::cpu
