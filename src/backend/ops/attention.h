// Causal multi-head self-attention, materialising the T×T scores (the fused,
// flash-style kernel is a later op; this one is the reference).
//
// Input qkv[B,T,3C] is the output of the fused c_attn projection: for token (b,t),
// q = qkv[b,t,0:C], k = qkv[b,t,C:2C], v = qkv[b,t,2C:3C], each split into NH heads of HS.
// scale = 1/sqrt(HS). Output out[B,T,C] has the heads concatenated (before c_proj).
#pragma once
#include <cstddef>

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

}  // namespace mptrain::cpu
