// Causal self-attention in mixed precision: the algorithm of attention.cpp (row blocks that
// skip the masked half, heads read through strides) with the products on gemm_mixed and the
// tensors in the dtypes of AttentionTypes. Scores, dP and the softmax arithmetic are fp32
// (scratch); P and dS are rounded once, when written for the products that read them.
#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/lowp.h"
#include "backend/cpu/vec_math.h"
#include "backend/ops/attention.h"
#include "core/error.h"

namespace mptrain::cpu {

namespace {

constexpr int kRowBlock = 128;  // as attention.cpp
constexpr int kRowsPerTask = 16;

struct Views {
  GemmLayout rows_qkv, cols_qkv, rows_bt, rows_tt, cols_tt;
  Views(int NH, int T, int C) {
    const std::int64_t HS = C / NH, t = T, c = C;
    rows_qkv = {t * 3 * c, HS, 3 * c, 1};
    cols_qkv = {t * 3 * c, HS, 1, 3 * c};
    rows_bt = {t * c, HS, c, 1};
    rows_tt = {NH * t * t, t * t, t, 1};
    cols_tt = {NH * t * t, t * t, 1, t};
  }
};

inline int block_end(int t, int T) { return std::min(T, (t / kRowBlock + 1) * kRowBlock); }

// Element `i` of a buffer of dtype t.
template <class P>
P* at(P* base, size_t i, StorageType t) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<Byte*>(base) + i * storage_bytes(t);
}

void check(const char* op, int B, int T, int C, int NH) {
  MPT_CHECK(B > 0 && T > 0 && C > 0 && NH > 0 && C % NH == 0,
            std::string("[") + op + "] bad size B=" + std::to_string(B) + " T=" + std::to_string(T) +
                " C=" + std::to_string(C) + " NH=" + std::to_string(NH) + " (C must be a multiple of NH)");
}

size_t tt(int B, int T, int NH) { return static_cast<size_t>(B) * NH * T * T; }

}  // namespace

size_t attention_saved_bytes_typed(int B, int T, int /*C*/, int NH, const AttentionTypes& types) {
  return tt(B, T, NH) * storage_bytes(types.probs);
}

size_t attention_scratch_bytes_typed(int B, int T, int /*C*/, int NH, const AttentionTypes& types) {
  return tt(B, T, NH) * (sizeof(float) + storage_bytes(types.ds));
}

void attention_forward_typed(void* out, void* saved, const void* qkv, void* scratch, const AttentionTypes& ty,
                             int B, int T, int C, int NH, GemmWorkspace& ws, Context& ctx) {
  check("attention_forward_typed", B, T, C, NH);
  MPT_CHECK(out && saved && qkv && scratch, "[attention_forward_typed] null pointer");
  const int HS = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const size_t C3 = 3 * static_cast<size_t>(C), Cs = static_cast<size_t>(C);
  const Views v(NH, T, C);
  float* scores = static_cast<float*>(scratch);

  for (int r0 = 0; r0 < T; r0 += kRowBlock) {
    const int r1 = std::min(T, r0 + kRowBlock);
    gemm_mixed(scores + static_cast<size_t>(r0) * T, StorageType::F32, v.rows_tt,
               {at(qkv, r0 * C3, ty.qkv), ty.qkv, v.rows_qkv}, {at(qkv, Cs, ty.qkv), ty.qkv, v.cols_qkv},
               ty.scores, B, NH, r1 - r0, r1, HS, false, ws, ctx);
  }

  // Causal softmax of scale·scores in fp32, in place, then P rounded once into `saved`.
  const long long rows = static_cast<long long>(B) * NH * T;
#pragma omp parallel for schedule(static, kRowsPerTask)
  for (long long r = 0; r < rows; ++r) {
    const int t = static_cast<int>(r % T);
    float* p = scores + static_cast<size_t>(r) * T;
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
    dispatch_storage(ty.probs, [&](auto tag) {
      narrow_span(reinterpret_cast<decltype(tag)*>(at(saved, static_cast<size_t>(r) * T, ty.probs)), p, T);
    });
  }

  for (int r0 = 0; r0 < T; r0 += kRowBlock) {
    const int r1 = std::min(T, r0 + kRowBlock);
    gemm_mixed(
        at(out, r0 * Cs, ty.out), ty.out, v.rows_bt,
        {at(static_cast<const void*>(saved), static_cast<size_t>(r0) * T, ty.probs), ty.probs, v.rows_tt},
        {at(qkv, 2 * Cs, ty.qkv), ty.qkv, v.rows_qkv}, ty.values, B, NH, r1 - r0, HS, r1, false, ws, ctx);
  }
}

void attention_backward_typed(void* dqkv, const void* dout, const void* qkv, const void* saved, void* scratch,
                              const AttentionTypes& ty, int B, int T, int C, int NH, GemmWorkspace& ws,
                              Context& ctx) {
  check("attention_backward_typed", B, T, C, NH);
  MPT_CHECK(dqkv && dout && qkv && saved && scratch, "[attention_backward_typed] null pointer");
  const int HS = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const size_t C3 = 3 * static_cast<size_t>(C), Cs = static_cast<size_t>(C);
  const Views v(NH, T, C);
  float* dp = static_cast<float*>(scratch);
  void* ds = dp + tt(B, T, NH);

  // dP = dY·V^T (fp32), block rows [r0, r1), columns [0, r1).
  for (int r0 = 0; r0 < T; r0 += kRowBlock) {
    const int r1 = std::min(T, r0 + kRowBlock);
    gemm_mixed(dp + static_cast<size_t>(r0) * T, StorageType::F32, v.rows_tt,
               {at(dout, r0 * Cs, ty.out), ty.out, v.rows_bt}, {at(qkv, 2 * Cs, ty.qkv), ty.qkv, v.cols_qkv},
               ty.values, B, NH, r1 - r0, r1, HS, false, ws, ctx);
  }

  // dS = scale·P ⊙ (dP - rowsum(P ⊙ dP)) in fp32, zero above the diagonal up to the block end,
  // rounded once into ds.
  const long long rows = static_cast<long long>(B) * NH * T;
#pragma omp parallel for schedule(static, kRowsPerTask)
  for (long long r = 0; r < rows; ++r) {
    const int t = static_cast<int>(r % T);
    const int end = block_end(t, T);
    float* d = dp + static_cast<size_t>(r) * T;
    float p[kChunk];
    float dot = 0.0f;
    for (int j0 = 0; j0 <= t; j0 += static_cast<int>(kChunk)) {
      const int len = std::min(static_cast<int>(kChunk), t + 1 - j0);
      dispatch_storage(ty.probs, [&](auto tag) {
        widen_span(
            p, reinterpret_cast<const decltype(tag)*>(at(saved, static_cast<size_t>(r) * T + j0, ty.probs)),
            len);
      });
#pragma omp simd reduction(+ : dot)
      for (int j = 0; j < len; ++j) dot += p[j] * d[j0 + j];
    }
    for (int j0 = 0; j0 <= t; j0 += static_cast<int>(kChunk)) {
      const int len = std::min(static_cast<int>(kChunk), t + 1 - j0);
      dispatch_storage(ty.probs, [&](auto tag) {
        widen_span(
            p, reinterpret_cast<const decltype(tag)*>(at(saved, static_cast<size_t>(r) * T + j0, ty.probs)),
            len);
      });
      for (int j = 0; j < len; ++j) d[j0 + j] = scale * p[j] * (d[j0 + j] - dot);
    }
    for (int j = t + 1; j < end; ++j) d[j] = 0.0f;
    dispatch_storage(ty.ds, [&](auto tag) {
      narrow_span(reinterpret_cast<decltype(tag)*>(at(ds, static_cast<size_t>(r) * T, ty.ds)), d, end);
    });
  }

  const void* cds = ds;
  for (int r0 = 0; r0 < T; r0 += kRowBlock) {
    const int r1 = std::min(T, r0 + kRowBlock);
    const size_t diag = static_cast<size_t>(r0) * T + r0;
    // dQ[r0:r1] = dS[r0:r1, 0:r1]·K[0:r1]
    gemm_mixed(at(dqkv, r0 * C3, ty.qkv), ty.qkv, v.rows_qkv,
               {at(cds, static_cast<size_t>(r0) * T, ty.ds), ty.ds, v.rows_tt},
               {at(qkv, Cs, ty.qkv), ty.qkv, v.rows_qkv}, ty.scores, B, NH, r1 - r0, HS, r1, false, ws, ctx);
    // dK[r0:r1] = dS[r0:T, r0:r1]^T·Q[r0:T]
    gemm_mixed(at(dqkv, Cs + r0 * C3, ty.qkv), ty.qkv, v.rows_qkv, {at(cds, diag, ty.ds), ty.ds, v.cols_tt},
               {at(qkv, r0 * C3, ty.qkv), ty.qkv, v.rows_qkv}, ty.scores, B, NH, r1 - r0, HS, T - r0, false,
               ws, ctx);
    // dV[r0:r1] = P[r0:T, r0:r1]^T·dY[r0:T]
    gemm_mixed(at(dqkv, 2 * Cs + r0 * C3, ty.qkv), ty.qkv, v.rows_qkv,
               {at(saved, diag, ty.probs), ty.probs, v.cols_tt},
               {at(dout, r0 * Cs, ty.out), ty.out, v.rows_bt}, ty.values, B, NH, r1 - r0, HS, T - r0, false,
               ws, ctx);
  }
}

}  // namespace mptrain::cpu
