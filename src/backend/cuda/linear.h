// The linear layer in nn.Linear's layout on the GPU: backend/ops/linear.h's contract
// (weight[OC, C], out = inp·weight^T + bias) for a storage type T, BERT's layout (GPT-2's
// Conv1D layout weight[C, OC] is matmul.h). cuBLASLt reads the transpose through its flags.
// Every tensor is T; MathMode picks fp32 or TF32 when T is float (gemm.h). Device pointers;
// asynchronous.
#pragma once
#include "backend/cuda/context.h"
#include "backend/cuda/gemm.h"

namespace mptrain::cuda {

// out[N,OC] (=) = inp[N,C]·weight[OC,C]^T + bias[OC] (bias may be null: the Bias epilogue).
template <class T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC, MathMode math,
                    Context& ctx);

// dinp[N,C] += dout·weight (dinp may be null); dweight[OC,C] += dout^T·inp; dbias[OC] += Σ_n
// dout[n,:] (may be null). All accumulated (+=), as on the CPU. The bias gradient is the
// product ones[1,N]·dout: the column sums of dout are the op(A) side of the dweight product,
// which no cuBLASLt epilogue of ours reduces (matmul.h's BiasGradB sums op(B)), and a GEMM
// against ones is deterministic and needs no kernel of its own. ones: N elements equal to 1
// (device; the caller keeps one for its largest N).
template <class T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     const T* ones, int N, int C, int OC, MathMode math, Context& ctx);

}  // namespace mptrain::cuda
