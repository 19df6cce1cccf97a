// Multi-head self-attention materialising the T×T scores (cpu/attention.cpp), causal
// (GPT-2) or bidirectional under a key padding mask (BERT), every product in a chosen arithmetic
// (fp32 accumulation) and every tensor in a chosen dtype, from the precision policy: fp32 is one
// of them, not a kernel of its own. Scores and the softmax are fp32; P is rounded once when saved.
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

struct AttentionTypes {
  StorageType qkv;    // qkv [B,T,3C]; dqkv is written in it too (c_attn's backward reads it)
  StorageType probs;  // saved P [B,NH,T,T] (entries above the diagonal, or on padded keys, are 0)
  StorageType out;    // out [B,T,C]; dout is read in it too
  StorageType ds;     // dS [B,NH,T,T] in backward (an operand of the dQ, dK products)
  ComputeType scores;    // Q·K^T, dQ = dS·K, dK = dS^T·Q
  ComputeType values;    // P·V, dP = dY·V^T, dV = P^T·dY
};
// Bytes of saved state (P, written by forward, read by backward) and of scratch (fp32 scores /
// dP, then dS; not preserved).
size_t attention_saved_bytes_typed(int B, int T, int C, int NH, const AttentionTypes& types);
size_t attention_scratch_bytes_typed(int B, int T, int C, int NH, const AttentionTypes& types);

// causal: GPT-2's mask. Otherwise bidirectional under key_mask[B,T], Hugging Face's
// attention_mask: nonzero = a real token every query may attend to, 0 = padding no query sees
// (null = no padding). Query rows at padded positions are computed like any other (over the real
// keys), as PyTorch does. A sequence with no real key at all is refused (check_key_mask).
// With cu_seqlens [B+1] (bidirectional, no key mask) the rows are packed sequences
// (backend/backend.h's EmbeddingArgs): each attends to its own L <= T rows, one sequence after
// another; P takes NH·L² of the saved B·NH·T² entries per sequence, back to back.
// kv_heads (grouped-query attention; 0 = NH): qkv rows are (NH + 2·kv_heads)·HS wide, q heads then
// k then v, and query head h reads key/value head h / (NH / kv_heads); backward sums a key/value
// head's gradient over its group in head order (in dqkv's dtype, one rounding per member).
void attention_forward_typed(void* out, void* saved, const void* qkv, void* scratch,
                             const AttentionTypes& types, int B, int T, int C, int NH, GemmWorkspace& ws,
                             Context& ctx, bool causal = true, const int* key_mask = nullptr,
                             const int* cu_seqlens = nullptr, int kv_heads = 0);
// dqkv (=, every element written once, dtype types.qkv); dout in types.out. Reads the same qkv
// and saved state forward used; needs no key mask (P is 0 on padded keys, so their k and v get 0).
void attention_backward_typed(void* dqkv, const void* dout, const void* qkv, const void* saved, void* scratch,
                              const AttentionTypes& types, int B, int T, int C, int NH, GemmWorkspace& ws,
                              Context& ctx, bool causal = true, const int* cu_seqlens = nullptr,
                              int kv_heads = 0);
// Throws Error "[op] sequence b of the batch is all padding" when a row of key_mask[B,T] has no
// real key (a softmax over no keys is undefined). Null = no padding: nothing to check.
void check_key_mask(const char* op, const int* key_mask, int B, int T);

}  // namespace mptrain::cpu
