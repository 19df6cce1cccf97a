// The nn.Linear-layout linear layer (linear.h) as cuBLASLt products on top of gemm().
#include "backend/cuda/linear.h"

#include <string>

#include "backend/cuda/dispatch.h"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {
std::string dims(const char* op, int N, int C, int OC, StorageType t) {
  return std::string("[") + op + "] N=" + std::to_string(N) + " C=" + std::to_string(C) +
         " OC=" + std::to_string(OC) + " dtype=" + storage_name(t);
}
}  // namespace

template <class T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC, MathMode math,
                    Context& ctx) {
  MPT_PROFILE_RANGE("linear_forward");
  constexpr StorageType t = storage_of<T>();
  MPT_CHECK(N >= 0 && C > 0 && OC > 0, dims("linear_forward", N, C, OC, t) + ": bad size");
  if (N == 0) return;
  MPT_CHECK(out && inp && weight, dims("linear_forward", N, C, OC, t) + ": null pointer");
  GemmEpilogue ep;
  if (bias) {
    ep.kind = Epilogue::Bias;
    ep.bias = bias;
  }
  // out[N,OC] = inp[N,C]·(weight[OC,C])^T
  gemm(out, t, inp, weight, t, N, OC, C, false, true, false, math, ep, ctx);
}

template <class T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     const T* ones, int N, int C, int OC, MathMode math, Context& ctx) {
  MPT_PROFILE_RANGE("linear_backward");
  constexpr StorageType t = storage_of<T>();
  MPT_CHECK(N >= 0 && C > 0 && OC > 0, dims("linear_backward", N, C, OC, t) + ": bad size");
  if (N == 0) return;
  MPT_CHECK(dweight && dout && inp && weight && (!dbias || ones),
            dims("linear_backward", N, C, OC, t) + ": null pointer");
  // dinp[N,C] += dout[N,OC]·weight[OC,C]
  if (dinp) gemm(dinp, t, dout, weight, t, N, C, OC, false, false, true, math, GemmEpilogue{}, ctx);
  // dweight[OC,C] += (dout[N,OC])^T·inp[N,C]
  gemm(dweight, t, dout, inp, t, OC, C, N, true, false, true, math, GemmEpilogue{}, ctx);
  // dbias[1,OC] += ones[1,N]·dout[N,OC]
  if (dbias) gemm(dbias, t, ones, dout, t, 1, OC, N, false, false, true, math, GemmEpilogue{}, ctx);
}

#define MPT_INSTANTIATE(T)                                                                              \
  template void linear_forward<T>(T*, const T*, const T*, const T*, int, int, int, MathMode, Context&); \
  template void linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, int, int, int,   \
                                   MathMode, Context&);
MPT_INSTANTIATE(float)
MPT_INSTANTIATE(Bf16)
MPT_INSTANTIATE(Fp16)
#undef MPT_INSTANTIATE

}  // namespace mptrain::cuda
