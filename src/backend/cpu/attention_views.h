// Private to the CPU backend: what the three attention implementations (attention.cpp causal
// fp32, attention_masked.cpp key-masked fp32, attention_typed.cpp both forms typed) share — the
// size check, the strided per-(b, h) views that let oneDNN read q, k, v straight out of
// qkv[B,T,3C] and write out[B,T,C] without permute copies, and the two row softmaxes (one
// definition, so the typed path's fp32 arithmetic is the fp32 path's bit for bit).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "backend/cpu/vec_math.h"
#include "backend/ops/gemm.h"
#include "core/error.h"

namespace mptrain::cpu {

inline void check_attention_sizes(const char* op, int B, int T, int C, int NH) {
  MPT_CHECK(B > 0 && T > 0 && C > 0 && NH > 0 && C % NH == 0,
            std::string("[") + op + "] bad size B=" + std::to_string(B) + " T=" + std::to_string(T) +
                " C=" + std::to_string(C) + " NH=" + std::to_string(NH) + " (C must be a multiple of NH)");
}

// Strides, in elements, of the per-(b, h) views.
struct AttentionViews {
  GemmLayout rows_qkv;  // a head of q, k or v inside qkv: [T, HS], row stride 3C
  GemmLayout cols_qkv;  // the same head transposed: [HS, T]
  GemmLayout rows_bt;   // a head of out / dout: [T, HS], row stride C
  GemmLayout rows_tt;   // att / dS: [T, T] per (b, h)
  GemmLayout cols_tt;   // att / dS transposed
  AttentionViews(int NH, int T, int C) {
    const std::int64_t HS = C / NH, t = T, c = C;
    rows_qkv = {t * 3 * c, HS, 3 * c, 1};
    cols_qkv = {t * 3 * c, HS, 1, 3 * c};
    rows_bt = {t * c, HS, c, 1};
    rows_tt = {NH * t * t, t * t, t, 1};
    cols_tt = {NH * t * t, t * t, 1, t};
  }
};

// Row t of a causal softmax of scale·p[0, T), in place: keys 0..t, zeros above the diagonal.
inline void causal_softmax_row(float* p, int t, int T, float scale) {
  float m = p[0];
#pragma omp simd reduction(max : m)
  for (int j = 1; j <= t; ++j) m = p[j] > m ? p[j] : m;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j <= t; ++j) {
    float e = vexp((p[j] - m) * scale);
    p[j] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
  for (int j = 0; j <= t; ++j) p[j] *= inv;
  for (int j = t + 1; j < T; ++j) p[j] = 0.0f;
}

// A softmax of scale·p[0, T) over the real keys (key_mask[j] != 0; null = all real), in place:
// padded keys get probability exactly 0.
inline void masked_softmax_row(float* p, const int* key_mask, int T, float scale) {
  float mx = -INFINITY;
  for (int j = 0; j < T; ++j)
    if (!key_mask || key_mask[j]) mx = p[j] > mx ? p[j] : mx;
  float sum = 0.0f;
  for (int j = 0; j < T; ++j) {
    const float e = (!key_mask || key_mask[j]) ? vexp((p[j] - mx) * scale) : 0.0f;
    p[j] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int j = 0; j < T; ++j) p[j] *= inv;
}

}  // namespace mptrain::cpu
