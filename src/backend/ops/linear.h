// The linear layer in PyTorch's nn.Linear layout, weight[OC, C] (out, in): out = inp·weight^T + bias.
// BERT stores its weights this way (Hugging Face's BertForPreTraining uses nn.Linear), so its
// checkpoints are plain copies; gemm's transpose flags read the layout through strides, at no
// cost. (GPT-2's Conv1D layout [C, OC] is matmul_forward/backward in gemm.h.) Every BERT GEMM
// on weights goes through these two functions, so a precision policy has one place to act.
#pragma once

namespace mptrain::cpu {

class Context;

// out[N,OC] = inp[N,C]·weight[OC,C]^T + bias[OC] (bias may be null). out is overwritten.
void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC,
                    Context& ctx);

// dinp[N,C] += dout·weight (dinp may be null: no input gradient); dweight[OC,C] += dout^T·inp;
// dbias[OC] += column sums of dout (may be null). All accumulated (+=).
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC, Context& ctx);

}  // namespace mptrain::cpu
