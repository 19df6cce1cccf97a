// Exact GELU forward and backward (gelu_erf.h), cpu/gelu_erf.cpp's formulas:
//   gelu(x) = 0.5·x·(1 + erf(x/sqrt(2)));  gelu'(x) = Phi(x) + x·phi(x)
// erff and expf (not the fast intrinsics) keep fp32 results within a few ulp of the CPU's libm.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/gelu_erf.h"

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
  map_op<T, 1>("gelu_erf_forward", out, Inputs<T, 1>{{inp}}, N, GeluErfFwd{}, ctx);
}

template <class T>
void gelu_erf_backward(T* dinp, const T* inp, const T* dout, size_t N, Context& ctx) {
  map_op<T, 2>("gelu_erf_backward", dinp, Inputs<T, 2>{{inp, dout}}, N, GeluErfBwd{}, ctx);
}

MPT_INSTANTIATE_ACTIVATION(gelu_erf_forward, gelu_erf_backward)

}  // namespace mptrain::cuda
