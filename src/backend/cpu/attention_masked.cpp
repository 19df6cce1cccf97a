// Bidirectional self-attention under a key padding mask, on oneDNN batched matmuls over (b, h)
// that read q, k, v straight out of qkv[B,T,3C] through strides (as cpu/attention.cpp does for
// the causal case). Per (b, h), with S = Q·K^T·scale and P = softmax over the real keys:
//   forward:  S = Q·K^T;  P = masked softmax(scale·S);  Y = P·V
//   backward: dP = dY·V^T;  dS = scale·P ⊙ (dP - rowsum(P ⊙ dP))
//             dQ = dS·K;  dK = dS^T·Q;  dV = P^T·dY
// Padded keys get probability exactly 0 (PyTorch adds finfo.min to their scores, whose exp
// underflows to 0 as well), so they receive no gradient through dK and dV.
#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/attention_views.h"
#include "backend/cpu/vec_math.h"
#include "backend/ops/attention_masked.h"
#include "backend/ops/gemm.h"
#include "core/error.h"

namespace mptrain::cpu {

void check_key_mask(const char* op, const int* key_mask, int B, int T) {
  if (!key_mask) return;
  for (int b = 0; b < B; ++b) {
    const int* m = key_mask + static_cast<size_t>(b) * T;
    MPT_CHECK(std::any_of(m, m + T, [](int x) { return x != 0; }),
              std::string("[") + op + "] sequence " + std::to_string(b) + " of the batch is all padding");
  }
}

void attention_masked_forward(float* out, float* saved, const float* qkv, const int* key_mask, float* /*scratch*/,
                              int B, int T, int C, int NH, Context& ctx) {
  check_attention_sizes("attention_masked_forward", B, T, C, NH);
  MPT_CHECK(out && saved && qkv, "[attention_masked_forward] null pointer");
  check_key_mask("attention_masked_forward", key_mask, B, T);
  const int HS = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const AttentionViews v(NH, T, C);
  float* att = saved;

  gemm_batched(att, v.rows_tt, qkv, v.rows_qkv, qkv + C, v.cols_qkv, B, NH, T, T, HS, false, ctx);

  const long long rows = static_cast<long long>(B) * NH * T;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const int b = static_cast<int>(r / (static_cast<long long>(NH) * T));
    const int* m = key_mask ? key_mask + static_cast<size_t>(b) * T : nullptr;
    masked_softmax_row(att + static_cast<size_t>(r) * T, m, T, scale);
  }

  gemm_batched(out, v.rows_bt, att, v.rows_tt, qkv + 2 * static_cast<size_t>(C), v.rows_qkv, B, NH, T, HS, T,
               false, ctx);
}

void attention_masked_backward(float* dqkv, const float* dout, const float* qkv, const float* saved,
                               float* scratch, int B, int T, int C, int NH, Context& ctx) {
  check_attention_sizes("attention_masked_backward", B, T, C, NH);
  MPT_CHECK(dqkv && dout && qkv && saved && scratch, "[attention_masked_backward] null pointer");
  const int HS = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const size_t Cs = static_cast<size_t>(C);
  const AttentionViews v(NH, T, C);
  const float* att = saved;
  float* ds = scratch;

  // dP = dY·V^T
  gemm_batched(ds, v.rows_tt, dout, v.rows_bt, qkv + 2 * Cs, v.cols_qkv, B, NH, T, T, HS, false, ctx);

  // dS = scale·P ⊙ (dP - rowsum(P ⊙ dP)), in place (0 on padded keys, where P is 0).
  const long long rows = static_cast<long long>(B) * NH * T;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const float* p = att + static_cast<size_t>(r) * T;
    float* d = ds + static_cast<size_t>(r) * T;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < T; ++j) dot += p[j] * d[j];
#pragma omp simd
    for (int j = 0; j < T; ++j) d[j] = scale * p[j] * (d[j] - dot);
  }

  // dQ = dS·K;  dK = dS^T·Q;  dV = P^T·dY  (every element of dqkv written once)
  gemm_batched(dqkv, v.rows_qkv, ds, v.rows_tt, qkv + Cs, v.rows_qkv, B, NH, T, HS, T, false, ctx);
  gemm_batched(dqkv + Cs, v.rows_qkv, ds, v.cols_tt, qkv, v.rows_qkv, B, NH, T, HS, T, false, ctx);
  gemm_batched(dqkv + 2 * Cs, v.rows_qkv, att, v.cols_tt, dout, v.rows_bt, B, NH, T, HS, T, false, ctx);
}

}  // namespace mptrain::cpu
