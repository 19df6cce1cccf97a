// The linear layer (matmul.h) as cuBLASLt products with epilogues, on top of gemm().
#include "backend/cuda/matmul.h"

#include <string>

#include "backend/cuda/dispatch.h"
#include "backend/cuda/profiling.h"
#include "backend/cuda/residual.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {
std::string dims(int N, int C, int OC, StorageType t) {
  return "N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
         " dtype=" + storage_name(t);
}
}  // namespace

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC, MathMode math,
                    Context& ctx, T* pre_gelu) {
  MPT_PROFILE_RANGE("matmul_forward");
  constexpr StorageType t = storage_of<T>();
  MPT_CHECK(N >= 0 && C > 0 && OC >= 0, "[matmul_forward] bad size: " + dims(N, C, OC, t));
  MPT_CHECK(out && inp && weight, "[matmul_forward] null pointer: " + dims(N, C, OC, t));
  MPT_CHECK(!pre_gelu || OC % 8 == 0, "[matmul_forward] fused GELU needs OC % 8 == 0: " + dims(N, C, OC, t));
  GemmEpilogue ep;
  if (pre_gelu) {
    ep.kind = Epilogue::GeluBias;
    ep.bias = bias;
    ep.aux = pre_gelu;
  } else if (bias) {
    ep.kind = Epilogue::Bias;
    ep.bias = bias;
  }
  gemm(out, t, inp, weight, t, N, OC, C, false, false, false, math, ep, ctx);
}

template <class T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC, MathMode math, Context& ctx, const T* inp_pre_gelu) {
  MPT_PROFILE_RANGE("matmul_backward");
  constexpr StorageType t = storage_of<T>();
  MPT_CHECK(N > 0 && C > 0 && OC > 0, "[matmul_backward] bad size: " + dims(N, C, OC, t));
  MPT_CHECK(dinp && dweight && dout && inp && weight, "[matmul_backward] null pointer: " + dims(N, C, OC, t));
  MPT_CHECK(!inp_pre_gelu || C % 8 == 0,
            "[matmul_backward] fused GELU needs C % 8 == 0: " + dims(N, C, OC, t));
  // dinp[N,C] (+)= dout[N,OC]·weight[C,OC]^T
  GemmEpilogue ep_in;
  if (inp_pre_gelu) {
    ep_in.kind = Epilogue::DGelu;
    ep_in.aux = const_cast<T*>(inp_pre_gelu);  // read only: cuBLASLt's aux pointer is not const
  }
  gemm(dinp, t, dout, weight, t, N, C, OC, false, true, inp_pre_gelu == nullptr, math, ep_in, ctx);
  // dweight[C,OC] += inp[N,C]^T·dout[N,OC]; the bias gradient is the column sums of dout,
  // which is this product's op(B): the BiasGradB epilogue writes it (=) to scratch.
  GemmEpilogue ep_w;
  T* bias_grad = nullptr;
  if (dbias) {
    bias_grad = static_cast<T*>(ctx.scratch(static_cast<size_t>(OC) * sizeof(T)));
    ep_w.kind = Epilogue::BiasGradB;
    ep_w.bias_grad = bias_grad;
  }
  gemm(dweight, t, inp, dout, t, C, OC, N, true, false, true, math, ep_w, ctx);
  if (dbias) accumulate(dbias, bias_grad, static_cast<size_t>(OC), ctx);
}

#define MPT_INSTANTIATE(T)                                                                                  \
  template void matmul_forward<T>(T*, const T*, const T*, const T*, int, int, int, MathMode, Context&, T*); \
  template void matmul_backward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, int, MathMode,       \
                                   Context&, const T*);
MPT_INSTANTIATE(float)
MPT_INSTANTIATE(Bf16)
MPT_INSTANTIATE(Fp16)
#undef MPT_INSTANTIATE

}  // namespace mptrain::cuda
