// Bidirectional multi-head self-attention under a key padding mask (BERT), materialising the
// T×T scores. Same layouts as the causal op in attention.h: qkv[B,T,3C] holds q | k | v per
// token, heads of HS = C/NH; out[B,T,C] has the heads concatenated; scale = 1/sqrt(HS).
// Saved state and scratch sizes are attention.h's attention_saved_floats / _scratch_floats.
#pragma once
#include <cstddef>

namespace mptrain::cpu {

class Context;

// key_mask[B,T] is Hugging Face's attention_mask: nonzero = a real token every query may attend
// to, 0 = padding no query sees (null = no padding). Query rows at padded positions are computed
// like any other (over the real keys), as PyTorch does. A sequence with no real key at all is
// refused (Error). saved = att[B,NH,T,T], the probabilities (exactly 0 on padded keys).
void attention_masked_forward(float* out, float* saved, const float* qkv, const int* key_mask, float* scratch,
                              int B, int T, int C, int NH, Context& ctx);

// dqkv[B,T,3C] is overwritten (=). Needs no mask: P is 0 on padded keys, so their k and v get 0.
void attention_masked_backward(float* dqkv, const float* dout, const float* qkv, const float* saved,
                               float* scratch, int B, int T, int C, int NH, Context& ctx);

}  // namespace mptrain::cpu
