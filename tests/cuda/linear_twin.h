// The linear layer as compositions of cuda::gemm calls (Hugging Face Conv1D layout weight[C,OC];
// out = inp·weight + bias), for the GEMM tests and the op timings: the bias, GELU and their
// gradients as cuBLASLt epilogues where asked, checked against the CPU's matmul and against their
// unfused twins. The product reaches the same epilogues through CudaBackend::linear.
#pragma once
#include "backend/cuda/context.h"
#include "backend/cuda/dispatch.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/residual.h"
#include "common/cpu_fp32.h"
#include "core/error.h"

namespace mptrain::cuda {

// out[N,OC] = inp[N,C]·weight[C,OC] + bias[OC]  (=; bias may be null).
// With pre_gelu (non-null; OC % 8 == 0): pre_gelu[N,OC] (=) inp·weight + bias and
// out (=) gelu_tanh(pre_gelu), in one fused product.
template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC, ComputeType math,
                    Context& ctx, T* pre_gelu = nullptr) {
  MPT_CHECK(!pre_gelu || OC % 8 == 0, "[matmul_forward] fused GELU needs OC % 8 == 0");
  GemmEpilogue ep;
  if (pre_gelu) {
    ep.kind = LtEpilogue::GeluBias;
    ep.bias = bias;
    ep.aux = pre_gelu;
  } else if (bias) {
    ep.kind = LtEpilogue::Bias;
    ep.bias = bias;
  }
  gemm(out, storage_of<T>(), inp, weight, storage_of<T>(), N, OC, C, false, false, false, math, ep, ctx);
}

// dinp[N,C] += dout·weight^T;  dweight[C,OC] += inp^T·dout;  dbias[OC] += Σ_n dout[n,:] (dbias may
// be null; it comes out of the dweight product's epilogue into Context scratch, then is added).
// With inp_pre_gelu (non-null; C % 8 == 0): inp = gelu(inp_pre_gelu), and dinp is instead
// OVERWRITTEN (=) with (dout·weight^T) ⊙ gelu'(inp_pre_gelu).
template <class T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC, ComputeType math, Context& ctx, const T* inp_pre_gelu = nullptr) {
  constexpr StorageType t = storage_of<T>();
  GemmEpilogue ep_in;
  if (inp_pre_gelu) {
    ep_in.kind = LtEpilogue::DGelu;
    ep_in.aux = const_cast<T*>(inp_pre_gelu);  // read only: cuBLASLt's aux pointer is not const
  }
  gemm(dinp, t, dout, weight, t, N, C, OC, false, true, inp_pre_gelu == nullptr, math, ep_in, ctx);
  GemmEpilogue ep_w;
  T* bias_grad = nullptr;
  if (dbias) {
    bias_grad = static_cast<T*>(ctx.scratch(static_cast<size_t>(OC) * sizeof(T)));
    ep_w.kind = LtEpilogue::BiasGradB;
    ep_w.bias_grad = bias_grad;
  }
  gemm(dweight, t, inp, dout, t, C, OC, N, true, false, true, math, ep_w, ctx);
  if (dbias) accumulate(dbias, bias_grad, static_cast<size_t>(OC), ctx);
}

}  // namespace mptrain::cuda
