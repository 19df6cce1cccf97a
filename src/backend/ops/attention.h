// Causal multi-head self-attention, materialising the T×T scores (the fused,
// flash-style kernel is a later op; this one is the reference).
//
// Input qkv[B,T,3C] is the output of the fused c_attn projection: for token (b,t),
// q = qkv[b,t,0:C], k = qkv[b,t,C:2C], v = qkv[b,t,2C:3C], each split into NH heads of HS.
// scale = 1/sqrt(HS). Output out[B,T,C] has the heads concatenated (before c_proj).
#pragma once
#include <cstddef>

#include "backend/ops/gemm_mixed.h"
#include "core/dtype.h"

namespace mptrain::cpu {

class Context;

// Floats of saved state that forward writes and backward reads:
//   att[B,NH,T,T]   softmax probabilities (entries above the diagonal are 0)
size_t attention_saved_floats(int B, int T, int C, int NH);
// Floats of scratch that forward and backward may use freely (not preserved).
size_t attention_scratch_floats(int B, int T, int C, int NH);

void attention_forward(float* out, float* saved, const float* qkv, float* scratch, int B, int T, int C,
                       int NH, Context& ctx);

// dqkv[B,T,3C] is overwritten (=). Reads the same qkv and saved state forward used.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* saved, float* scratch,
                        int B, int T, int C, int NH, Context& ctx);

// Mixed precision (cpu/attention_typed.cpp): the same algorithm with every product in a chosen
// arithmetic (fp32 accumulation) and every tensor in a chosen dtype, from the precision policy.
// Scores and the softmax are fp32; P is rounded once when saved.
struct AttentionTypes {
  StorageType qkv;    // qkv [B,T,3C]; dqkv is written in it too (c_attn's backward reads it)
  StorageType probs;  // saved P [B,NH,T,T]
  StorageType out;    // out [B,T,C]; dout is read in it too
  StorageType ds;     // dS [B,NH,T,T] in backward (an operand of the dQ, dK products)
  GemmMath scores;    // Q·K^T, dQ = dS·K, dK = dS^T·Q
  GemmMath values;    // P·V, dP = dY·V^T, dV = P^T·dY
};
// Bytes of saved state (P) and of scratch (fp32 scores / dP, then dS) for the typed variants.
size_t attention_saved_bytes_typed(int B, int T, int C, int NH, const AttentionTypes& types);
size_t attention_scratch_bytes_typed(int B, int T, int C, int NH, const AttentionTypes& types);

void attention_forward_typed(void* out, void* saved, const void* qkv, void* scratch, const AttentionTypes& types, int B,
                             int T, int C, int NH, GemmWorkspace& ws, Context& ctx);
// dqkv (=, dtype types.qkv); dout in types.out.
void attention_backward_typed(void* dqkv, const void* dout, const void* qkv, const void* saved, void* scratch,
                              const AttentionTypes& types, int B, int T, int C, int NH, GemmWorkspace& ws,
                              Context& ctx);

}  // namespace mptrain::cpu
