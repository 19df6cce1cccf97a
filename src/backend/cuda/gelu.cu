// GELU (tanh form) forward and backward, in the sigmoid form of cpu/gelu.cpp:
//   s = sigmoid(2u), u = sqrt(2/pi)·(x + 0.044715·x^3);  gelu = x·s
//   gelu' = s + 2·x·s·(1 - s)·u',  u' = sqrt(2/pi)·(1 + 3·0.044715·x^2)
// expf (not __expf) so that fp32 results stay within a few ulp of the CPU's.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/gelu.h"

namespace mptrain::cuda {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
constexpr float kMaxExpArg = 80.0f;  // as on the CPU: 1 + exp(a) stays finite

__device__ __forceinline__ float sigmoid_2u(float x) {
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return 1.0f / (1.0f + expf(fminf(-2.0f * u, kMaxExpArg)));
}

struct GeluFwd {
  __device__ float operator()(float x) const { return x * sigmoid_2u(x); }
};
struct GeluBwd {
  __device__ float operator()(float x, float dy) const {
    const float s = sigmoid_2u(x);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    return (s + 2.0f * x * s * (1.0f - s) * du) * dy;
  }
};

}  // namespace

template <class T>
void gelu_forward(T* out, const T* inp, size_t N, Context& ctx) {
  map_op<T, 1>("gelu_forward", out, Inputs<T, 1>{{inp}}, N, GeluFwd{}, ctx);
}

template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t N, Context& ctx) {
  map_op<T, 2>("gelu_backward", dinp, Inputs<T, 2>{{inp, dout}}, N, GeluBwd{}, ctx);
}

MPT_INSTANTIATE_ACTIVATION(gelu_forward, gelu_backward)

}  // namespace mptrain::cuda
