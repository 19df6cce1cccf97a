// The linear layer on the GPU: backend/ops/gemm.h's matmul_forward / matmul_backward contract
// (Hugging Face Conv1D layout weight[C,OC]; out = inp·weight + bias) for a storage type T,
// with the bias, GELU and their gradients fused into cuBLASLt epilogues where asked.
// Every tensor is T; MathMode picks fp32 or TF32 when T is float (see gemm.h).
#pragma once
#include "backend/cuda/context.h"
#include "backend/cuda/gemm.h"

namespace mptrain::cuda {

// out[N,OC] = inp[N,C]·weight[C,OC] + bias[OC]  (=; bias may be null).
// With pre_gelu (non-null; OC % 8 == 0): pre_gelu[N,OC] (=) inp·weight + bias and
// out (=) gelu_tanh(pre_gelu), in one fused product. Unfused twin: matmul_forward into
// pre_gelu, then gelu_forward.
template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC, MathMode math,
                    Context& ctx, T* pre_gelu = nullptr);

// dinp[N,C] += dout·weight^T;  dweight[C,OC] += inp^T·dout;  dbias[OC] += Σ_n dout[n,:]
// (all accumulated, +=, as on the CPU; dbias may be null). The bias gradient comes out of
// the dweight product's epilogue (into Context scratch, then added).
// With inp_pre_gelu (non-null; C % 8 == 0): inp = gelu(inp_pre_gelu) (the fused forward's
// pre_gelu), and dinp is instead OVERWRITTEN (=) with the gradient with respect to
// inp_pre_gelu: (dout·weight^T) ⊙ gelu'(inp_pre_gelu). Unfused twin: the product into a
// zeroed buffer, then gelu_backward.
template <class T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC, MathMode math, Context& ctx, const T* inp_pre_gelu = nullptr);

}  // namespace mptrain::cuda
