// Causal self-attention on oneDNN batched matmuls over (b, h), reading q, k, v straight out of
// qkv[B,T,3C] and writing out[B,T,C] / dqkv[B,T,3C] through strides (no permute copies).
//
// Causality is exploited by row blocks of kRowBlock queries: block [r0, r1) only needs keys
// [0, r1), so the score and value products skip the blocks above the diagonal (about 56% of the
// full T×T work at T = 1024). Per (b, h), with S = Q·K^T·scale and P = softmax(S) (causal):
//   forward:  P rows [r0,r1) from Q[r0:r1]·K[0:r1]^T;  Y[r0:r1] = P[r0:r1, 0:r1]·V[0:r1]
//   backward: dP = dY·V^T (same blocks);  dS = scale·P ⊙ (dP - rowsum(P ⊙ dP))
//             dQ[r0:r1] = dS[r0:r1, 0:r1]·K[0:r1]
//             dK[r0:r1] = dS[r0:T, r0:r1]^T·Q[r0:T];   dV[r0:r1] = P[r0:T, r0:r1]^T·dY[r0:T]
// Every element of dqkv is written exactly once (=).
#include "backend/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/attention_views.h"
#include "backend/cpu/vec_math.h"
#include "backend/ops/gemm.h"
#include "core/error.h"

namespace mptrain::cpu {

namespace {

// Query rows per block: large enough for efficient GEMM tiles, small enough that the triangle
// skipped is most of the upper half.
constexpr int kRowBlock = 128;
// Softmax rows per OpenMP chunk: rows of one head grow in length with t, so small interleaved
// chunks keep the threads balanced.
constexpr int kRowsPerTask = 16;

inline int block_end(int t, int T) { return std::min(T, (t / kRowBlock + 1) * kRowBlock); }

}  // namespace

size_t attention_saved_floats(int B, int T, int /*C*/, int NH) { return static_cast<size_t>(B) * NH * T * T; }

// Backward keeps dP, then dS, for every (b, h): [B, NH, T, T]. Forward uses none.
size_t attention_scratch_floats(int B, int T, int /*C*/, int NH) {
  return static_cast<size_t>(B) * NH * T * T;
}

void attention_forward(float* out, float* saved, const float* qkv, float* /*scratch*/, int B, int T, int C,
                       int NH, Context& ctx) {
  check_attention_sizes("attention_forward", B, T, C, NH);
  MPT_CHECK(out && saved && qkv, "[attention_forward] null pointer");
  const int HS = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const size_t C3 = 3 * static_cast<size_t>(C);
  const AttentionViews v(NH, T, C);
  float* att = saved;

  // Raw scores Q·K^T for each block's rows and its keys [0, r1).
  for (int r0 = 0; r0 < T; r0 += kRowBlock) {
    const int r1 = std::min(T, r0 + kRowBlock);
    gemm_batched(att + static_cast<size_t>(r0) * T, v.rows_tt, qkv + r0 * C3, v.rows_qkv, qkv + C, v.cols_qkv,
                 B, NH, r1 - r0, r1, HS, false, ctx);
  }

  // Causal softmax of scale·scores, in place; zeros above the diagonal.
  const long long rows = static_cast<long long>(B) * NH * T;
#pragma omp parallel for schedule(static, kRowsPerTask)
  for (long long r = 0; r < rows; ++r) {
    const int t = static_cast<int>(r % T);
    causal_softmax_row(att + static_cast<size_t>(r) * T, t, T, scale);
  }

  // Y = P·V, written into the head's columns of out.
  for (int r0 = 0; r0 < T; r0 += kRowBlock) {
    const int r1 = std::min(T, r0 + kRowBlock);
    gemm_batched(out + static_cast<size_t>(r0) * C, v.rows_bt, att + static_cast<size_t>(r0) * T, v.rows_tt,
                 qkv + 2 * static_cast<size_t>(C), v.rows_qkv, B, NH, r1 - r0, HS, r1, false, ctx);
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* saved, float* scratch,
                        int B, int T, int C, int NH, Context& ctx) {
  check_attention_sizes("attention_backward", B, T, C, NH);
  MPT_CHECK(dqkv && dout && qkv && saved && scratch, "[attention_backward] null pointer");
  const int HS = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const size_t C3 = 3 * static_cast<size_t>(C);
  const size_t Cs = static_cast<size_t>(C);
  const AttentionViews v(NH, T, C);
  const float* att = saved;
  float* ds = scratch;

  // dP = dY·V^T, block rows [r0, r1) and columns [0, r1).
  for (int r0 = 0; r0 < T; r0 += kRowBlock) {
    const int r1 = std::min(T, r0 + kRowBlock);
    gemm_batched(ds + static_cast<size_t>(r0) * T, v.rows_tt, dout + r0 * Cs, v.rows_bt, qkv + 2 * Cs,
                 v.cols_qkv, B, NH, r1 - r0, r1, HS, false, ctx);
  }

  // dS = scale·P ⊙ (dP - rowsum(P ⊙ dP)), in place. Columns above the diagonal up to the block
  // end are zeroed: the dQ and dK products below read them.
  const long long rows = static_cast<long long>(B) * NH * T;
#pragma omp parallel for schedule(static, kRowsPerTask)
  for (long long r = 0; r < rows; ++r) {
    const int t = static_cast<int>(r % T);
    const float* p = att + static_cast<size_t>(r) * T;
    float* d = ds + static_cast<size_t>(r) * T;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j <= t; ++j) dot += p[j] * d[j];
    for (int j = 0; j <= t; ++j) d[j] = scale * p[j] * (d[j] - dot);
    const int end = block_end(t, T);
    for (int j = t + 1; j < end; ++j) d[j] = 0.0f;
  }

  for (int r0 = 0; r0 < T; r0 += kRowBlock) {
    const int r1 = std::min(T, r0 + kRowBlock);
    const size_t diag = static_cast<size_t>(r0) * T + r0;  // element (r0, r0) of a [T, T] matrix
    // dQ[r0:r1] = dS[r0:r1, 0:r1]·K[0:r1]
    gemm_batched(dqkv + r0 * C3, v.rows_qkv, ds + static_cast<size_t>(r0) * T, v.rows_tt, qkv + Cs,
                 v.rows_qkv, B, NH, r1 - r0, HS, r1, false, ctx);
    // dK[r0:r1] = dS[r0:T, r0:r1]^T·Q[r0:T]
    gemm_batched(dqkv + Cs + r0 * C3, v.rows_qkv, ds + diag, v.cols_tt, qkv + r0 * C3, v.rows_qkv, B, NH,
                 r1 - r0, HS, T - r0, false, ctx);
    // dV[r0:r1] = P[r0:T, r0:r1]^T·dY[r0:T]
    gemm_batched(dqkv + 2 * Cs + r0 * C3, v.rows_qkv, att + diag, v.cols_tt, dout + r0 * Cs, v.rows_bt, B, NH,
                 r1 - r0, HS, T - r0, false, ctx);
  }
}

}  // namespace mptrain::cpu
