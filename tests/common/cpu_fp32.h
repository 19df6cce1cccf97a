// The fp32 forms of the CPU kernels, as the reference tests and the GPU tests' CPU twins call
// them: each is the one kernel the backend runs (typed, with every dtype fp32 and fp32
// products), so a test of these tests the product's code. The library has no fp32 copies.
#pragma once
#include <cmath>
#include <cstddef>

#include "backend/cpu/context.h"
#include "backend/ops/activations.h"
#include "backend/ops/attention.h"
#include "backend/ops/embeddings.h"
#include "backend/ops/gemm.h"
#include "backend/ops/gemm_mixed.h"
#include "backend/ops/layernorm.h"
#include "backend/ops/optimizer.h"
#include "optim/grad_norm.h"

namespace mptrain::cpu {

namespace fp32 {
inline constexpr StorageType F32 = StorageType::F32;
inline AttentionTypes attention_types() { return {F32, F32, F32, F32, ComputeType::F32, ComputeType::F32}; }
}  // namespace fp32

// --- products ---------------------------------------------------------------------------------

inline void gemm_batched(float* c, GemmLayout lc, const float* a, GemmLayout la, const float* b,
                         GemmLayout lb, int nb0, int nb1, int M, int N, int K, bool accumulate,
                         Context& ctx) {
  gemm_batched_typed(c, fp32::F32, lc, a, fp32::F32, la, b, fp32::F32, lb, nb0, nb1, M, N, K, accumulate,
                     ctx);
}

// C[M,N] = op(A)·op(B) (+ C when accumulate), row-major: op(A) = A stored [M,K] or A^T stored
// [K,M] (trans_a); op(B) = B stored [K,N] or B^T stored [N,K] (trans_b).
inline void gemm(float* c, const float* a, const float* b, int M, int N, int K, bool trans_a, bool trans_b,
                 bool accumulate, Context& ctx) {
  const GemmLayout la{0, 0, trans_a ? 1 : K, trans_a ? M : 1}, lb{0, 0, trans_b ? 1 : N, trans_b ? K : 1};
  gemm_batched(c, GemmLayout{0, 0, N, 1}, a, la, b, lb, 1, 1, M, N, K, accumulate, ctx);
}

namespace fp32 {
inline void add_bias(float* out, const float* bias, int N, int OC) {
  if (bias) bias_forward_typed(out, F32, out, bias, N, OC);
}
}  // namespace fp32

// The linear layer, Conv1D layout weight[C,OC]: out = inp·weight + bias (bias may be null).
inline void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                           int OC, Context& ctx) {
  gemm(out, inp, weight, N, OC, C, false, false, false, ctx);
  fp32::add_bias(out, bias, N, OC);
}
// dinp += dout·weight^T; dweight += inp^T·dout; dbias += column sums of dout (may be null).
inline void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                            const float* weight, int N, int C, int OC, Context& ctx) {
  gemm(dinp, dout, weight, N, C, OC, false, true, true, ctx);
  gemm(dweight, inp, dout, C, OC, N, true, false, true, ctx);
  if (dbias) bias_backward_typed(dbias, dout, fp32::F32, N, OC);
}
// nn.Linear layout weight[OC,C]: out = inp·weight^T + bias.
inline void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                           int OC, Context& ctx) {
  gemm(out, inp, weight, N, OC, C, false, true, false, ctx);
  fp32::add_bias(out, bias, N, OC);
}
// dinp += dout·weight (dinp may be null); dweight += dout^T·inp; dbias += column sums of dout.
inline void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                            const float* weight, int N, int C, int OC, Context& ctx) {
  if (dinp) gemm(dinp, dout, weight, N, C, OC, false, false, true, ctx);
  gemm(dweight, dout, inp, OC, C, N, true, false, true, ctx);
  if (dbias) bias_backward_typed(dbias, dout, fp32::F32, N, OC);
}

// --- elementwise ------------------------------------------------------------------------------

inline void gelu_forward(float* out, const float* inp, size_t n) {
  gelu_forward_typed(out, fp32::F32, inp, fp32::F32, n);
}
inline void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  gelu_backward_typed(dinp, fp32::F32, inp, fp32::F32, dout, n);
}
inline void gelu_erf_forward(float* out, const float* inp, size_t n) {
  gelu_erf_forward_typed(out, fp32::F32, inp, fp32::F32, n);
}
inline void gelu_erf_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  gelu_erf_backward_typed(dinp, fp32::F32, inp, fp32::F32, dout, n);
}
inline void tanh_forward(float* out, const float* inp, size_t n) {
  tanh_forward_typed(out, fp32::F32, inp, fp32::F32, n);
}
inline void tanh_backward(float* dinp, const float* out, const float* dout, size_t n) {
  tanh_backward_typed(dinp, fp32::F32, out, fp32::F32, dout, n);
}
inline void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                              const float* bias, int N, int C, float eps) {
  layernorm_forward_typed(out, fp32::F32, mean, rstd, inp, weight, bias, N, C, eps);
}
// dst[i] += src[i]
inline void accumulate(float* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

// GPT-2's token + position embedding: the embeddings without token types.
inline void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T,
                            int C) {
  embeddings_forward(out, tokens, nullptr, wte, wpe, nullptr, B, T, C);
}
inline void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T,
                             int C) {
  embeddings_backward(dwte, dwpe, nullptr, dout, tokens, nullptr, -1, B, T, C);
}

// --- attention --------------------------------------------------------------------------------

inline size_t attention_saved_floats(int B, int T, int C, int NH) {
  return attention_saved_bytes_typed(B, T, C, NH, fp32::attention_types()) / sizeof(float);
}
inline size_t attention_scratch_floats(int B, int T, int C, int NH) {
  return attention_scratch_bytes_typed(B, T, C, NH, fp32::attention_types()) / sizeof(float);
}
inline void attention_forward(float* out, float* saved, const float* qkv, float* scratch, int B, int T, int C,
                              int NH, Context& ctx) {
  GemmWorkspace ws(ctx);
  attention_forward_typed(out, saved, qkv, scratch, fp32::attention_types(), B, T, C, NH, ws, ctx);
}
inline void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* saved,
                               float* scratch, int B, int T, int C, int NH, Context& ctx) {
  GemmWorkspace ws(ctx);
  attention_backward_typed(dqkv, dout, qkv, saved, scratch, fp32::attention_types(), B, T, C, NH, ws, ctx);
}
inline void attention_masked_forward(float* out, float* saved, const float* qkv, const int* key_mask,
                                     float* scratch, int B, int T, int C, int NH, Context& ctx) {
  GemmWorkspace ws(ctx);
  attention_forward_typed(out, saved, qkv, scratch, fp32::attention_types(), B, T, C, NH, ws, ctx, false,
                          key_mask);
}
inline void attention_masked_backward(float* dqkv, const float* dout, const float* qkv, const float* saved,
                                      float* scratch, int B, int T, int C, int NH, Context& ctx) {
  GemmWorkspace ws(ctx);
  attention_backward_typed(dqkv, dout, qkv, saved, scratch, fp32::attention_types(), B, T, C, NH, ws, ctx,
                           false);
}

}  // namespace mptrain::cpu

namespace mptrain {

// The step's norm and clipping on host buffers, for references: sqrt(sum g²) as the CPU
// backend's sum_squares sums it, and grads scaled by clip_coefficient (returned).
inline double global_norm(const float* grads, size_t n) { return std::sqrt(cpu::sum_of_squares(grads, n)); }
inline float clip_grad_norm(float* grads, size_t n, double norm, float max_norm) {
  const float c = clip_coefficient(norm, max_norm);
  if (c != 1.0f) cpu::scale(grads, n, c);
  return c;
}

}  // namespace mptrain
