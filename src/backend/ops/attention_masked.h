// Bidirectional multi-head self-attention under a key padding mask (BERT), materialising the
// T×T scores. Same layouts as the causal op in attention.h: qkv[B,T,3C] holds q | k | v per
// token, heads of HS = C/NH; out[B,T,C] has the heads concatenated; scale = 1/sqrt(HS).
// Saved state and scratch sizes are attention.h's attention_saved_floats / _scratch_floats
// (fp32), attention_saved_bytes_typed / _scratch_bytes_typed (typed variants).
#pragma once
#include <cstddef>

#include "backend/ops/attention.h"

namespace mptrain::cpu {

class Context;

// Throws Error "[op] sequence b of the batch is all padding" when a row of key_mask[B,T] has no
// real key (a softmax over no keys is undefined). Null = no padding: nothing to check.
void check_key_mask(const char* op, const int* key_mask, int B, int T);

// key_mask[B,T] is Hugging Face's attention_mask: nonzero = a real token every query may attend
// to, 0 = padding no query sees (null = no padding). Query rows at padded positions are computed
// like any other (over the real keys), as PyTorch does. A sequence with no real key at all is
// refused (Error). saved = att[B,NH,T,T], the probabilities (exactly 0 on padded keys).
void attention_masked_forward(float* out, float* saved, const float* qkv, const int* key_mask, float* scratch,
                              int B, int T, int C, int NH, Context& ctx);

// dqkv[B,T,3C] is overwritten (=). Needs no mask: P is 0 on padded keys, so their k and v get 0.
void attention_masked_backward(float* dqkv, const float* dout, const float* qkv, const float* saved,
                               float* scratch, int B, int T, int C, int NH, Context& ctx);

// Mixed precision: the same op with every product in a chosen arithmetic (fp32 accumulation)
// and every tensor in a chosen dtype (attention.h's AttentionTypes). Implemented with the
// typed causal attention in cpu/attention_typed.cpp (one algorithm, two masks); scores and the
// softmax are fp32, P is rounded once when saved. dqkv (=, dtype types.qkv); dout in types.out.
void attention_masked_forward_typed(void* out, void* saved, const void* qkv, const int* key_mask, void* scratch,
                                    const AttentionTypes& types, int B, int T, int C, int NH, GemmWorkspace& ws,
                                    Context& ctx);
void attention_masked_backward_typed(void* dqkv, const void* dout, const void* qkv, const void* saved,
                                     void* scratch, const AttentionTypes& types, int B, int T, int C, int NH,
                                     GemmWorkspace& ws, Context& ctx);

}  // namespace mptrain::cpu
