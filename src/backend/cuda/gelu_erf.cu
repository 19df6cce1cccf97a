// Exact GELU forward and backward (gelu_erf.h), cpu/gelu_erf.cpp's formulas:
//   gelu(x) = 0.5·x·(1 + erf(x/sqrt(2)));  gelu'(x) = Phi(x) + x·phi(x)
// erff and expf (not the fast intrinsics) keep fp32 results within a few ulp of the CPU's libm.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/gelu_erf.h"
#include "backend/cuda/profiling.h"

namespace mptrain::cuda {

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

struct GeluErfFwd {
  __device__ float operator()(float x) const { return 0.5f * x * (1.0f + erff(x * kInvSqrt2)); }
};
struct GeluErfBwd {
  __device__ float operator()(float x, float dy) const {
    const float cdf = 0.5f * (1.0f + erff(x * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
    return (cdf + x * pdf) * dy;
  }
};

}  // namespace

template <class T>
void gelu_erf_forward(T* out, const T* inp, size_t N, Context& ctx) {
  MPT_PROFILE_RANGE("gelu_erf_forward");
  MPT_CHECK(N == 0 || (out && inp), "[gelu_erf_forward] null pointer, N=" + std::to_string(N));
  launch_map<T, 1>(out, Inputs<T, 1>{{inp}}, N, GeluErfFwd{}, ctx, "gelu_erf_forward");
}

template <class T>
void gelu_erf_backward(T* dinp, const T* inp, const T* dout, size_t N, Context& ctx) {
  MPT_PROFILE_RANGE("gelu_erf_backward");
  MPT_CHECK(N == 0 || (dinp && inp && dout), "[gelu_erf_backward] null pointer, N=" + std::to_string(N));
  launch_map<T, 2>(dinp, Inputs<T, 2>{{inp, dout}}, N, GeluErfBwd{}, ctx, "gelu_erf_backward");
}

#define MPT_INSTANTIATE(T)                                           \
  template void gelu_erf_forward<T>(T*, const T*, size_t, Context&); \
  template void gelu_erf_backward<T>(T*, const T*, const T*, size_t, Context&);
MPT_INSTANTIATE(float)
MPT_INSTANTIATE(Bf16)
MPT_INSTANTIATE(Fp16)
#undef MPT_INSTANTIATE

}  // namespace mptrain::cuda
