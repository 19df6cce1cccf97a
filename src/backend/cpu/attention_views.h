// Private to the CPU backend: what the three attention implementations (attention.cpp causal
// fp32, attention_masked.cpp key-masked fp32, attention_typed.cpp both forms typed) share — the
// size check and the strided per-(b, h) views that let oneDNN read q, k, v straight out of
// qkv[B,T,3C] and write out[B,T,C] without permute copies.
#pragma once
#include <cstdint>
#include <string>

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

}  // namespace mptrain::cpu
