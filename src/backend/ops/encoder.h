// Token + position embedding (GPT-2's wte and wpe).
#pragma once

namespace mptrain::cpu {

// out[B,T,C] = wte[tokens[b,t], :] + wpe[t, :]. Token ids are validated by the data layer.
void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C);

// dwte[tok] += dout[b,t]; dwpe[t] += dout[b,t]  (accumulated, +=).
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C);

}  // namespace mptrain::cpu
