// The activations (activations.h), the CPU's formulas (cpu/activations.cpp) with the accurate
// functions, not the fast intrinsics (expf, erfcf, tanhf), so that fp32 results stay within a few
// ulp of the CPU's:
//   GELU, tanh form, as a sigmoid: s = sigmoid(2u), u = sqrt(2/pi)·(x + 0.044715·x^3); gelu = x·s
//     gelu' = s + 2·x·s·(1 - s)·u',  u' = sqrt(2/pi)·(1 + 3·0.044715·x^2)
//   exact GELU: gelu(x) = 0.5·x·(1 + erf(x/sqrt(2)));  gelu'(x) = Phi(x) + x·phi(x)
//   tanh: its backward reads the forward's output
#include "backend/cuda/activations.h"
#include "backend/cuda/elementwise.cuh"

namespace mptrain::cuda {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
constexpr float kMaxExpArg = 80.0f;  // as on the CPU: 1 + exp(a) stays finite
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

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
// Phi(x) = 0.5·erfc(-x/sqrt(2)): no cancellation in the negative tail (backend/cpu/activations.cpp).
struct GeluErfFwd {
  __device__ float operator()(float x) const { return 0.5f * x * erfcf(-x * kInvSqrt2); }
};
struct GeluErfBwd {
  __device__ float operator()(float x, float dy) const {
    const float cdf = 0.5f * erfcf(-x * kInvSqrt2);
    const float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
    return (cdf + x * pdf) * dy;
  }
};
struct TanhFwd {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct TanhBwd {
  __device__ float operator()(float y, float dy) const { return (1.0f - y * y) * dy; }
};

struct Relu2Fwd {
  __device__ float operator()(float x) const { return x > 0.0f ? x * x : 0.0f; }
};
struct Relu2Bwd {
  __device__ float operator()(float x, float dy) const { return x > 0.0f ? 2.0f * x * dy : 0.0f; }
};

// SwiGLU: one thread per (row, channel) of out, grid-stride; sigmoid with the accurate expf.
constexpr int kSwigluThreads = 256;

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

template <class T>
__global__ void swiglu_forward_kernel(T* out, const T* gate_up, size_t n, int I) {
  for (size_t k = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t row = k / I, c = k % I;
    const float g = to_f32(gate_up[row * 2 * I + c]), u = to_f32(gate_up[row * 2 * I + I + c]);
    out[k] = from_f32<T>(g * sigmoid(g) * u);
  }
}

template <class T>
__global__ void swiglu_backward_kernel(T* dgate_up, const T* dout, const T* gate_up, size_t n, int I) {
  for (size_t k = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t row = k / I, c = k % I, at = row * 2 * I + c;
    const float g = to_f32(gate_up[at]), u = to_f32(gate_up[at + I]), dy = to_f32(dout[k]);
    const float s = sigmoid(g);
    dgate_up[at] = from_f32<T>(dy * u * s * (1.0f + g * (1.0f - s)));
    dgate_up[at + I] = from_f32<T>(dy * g * s);
  }
}

}  // namespace

template <class T>
void gelu_forward(T* out, const T* inp, size_t N, Context& ctx) {
  map_op<T, 1>("gelu_forward", out, Inputs<T, 1>{{inp}}, N, GeluFwd{}, ctx);
}
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t N, Context& ctx) {
  map_op<T, 2>("gelu_backward", dinp, Inputs<T, 2>{{inp, dout}}, N, GeluBwd{}, ctx);
}
template <class T>
void gelu_erf_forward(T* out, const T* inp, size_t N, Context& ctx) {
  map_op<T, 1>("gelu_erf_forward", out, Inputs<T, 1>{{inp}}, N, GeluErfFwd{}, ctx);
}
template <class T>
void gelu_erf_backward(T* dinp, const T* inp, const T* dout, size_t N, Context& ctx) {
  map_op<T, 2>("gelu_erf_backward", dinp, Inputs<T, 2>{{inp, dout}}, N, GeluErfBwd{}, ctx);
}
template <class T>
void tanh_forward(T* out, const T* inp, size_t N, Context& ctx) {
  map_op<T, 1>("tanh_forward", out, Inputs<T, 1>{{inp}}, N, TanhFwd{}, ctx);
}
template <class T>
void tanh_backward(T* dinp, const T* out, const T* dout, size_t N, Context& ctx) {
  map_op<T, 2>("tanh_backward", dinp, Inputs<T, 2>{{out, dout}}, N, TanhBwd{}, ctx);
}

template <class T>
void swiglu_forward(T* out, const T* gate_up, int N, int I, Context& ctx) {
  MPT_PROFILE_RANGE("swiglu_forward");
  MPT_CHECK(N >= 0 && I >= 0, "[swiglu_forward] bad sizes");
  const size_t n = static_cast<size_t>(N) * I;
  if (n == 0) return;
  swiglu_forward_kernel<T>
      <<<grid_for(n, kSwigluThreads, ctx.info().sm_count), kSwigluThreads, 0, ctx.stream()>>>(out, gate_up, n,
                                                                                              I);
  MPT_CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
}

template <class T>
void swiglu_backward(T* dgate_up, const T* dout, const T* gate_up, int N, int I, Context& ctx) {
  MPT_PROFILE_RANGE("swiglu_backward");
  MPT_CHECK(N >= 0 && I >= 0, "[swiglu_backward] bad sizes");
  const size_t n = static_cast<size_t>(N) * I;
  if (n == 0) return;
  swiglu_backward_kernel<T>
      <<<grid_for(n, kSwigluThreads, ctx.info().sm_count), kSwigluThreads, 0, ctx.stream()>>>(dgate_up, dout,
                                                                                              gate_up, n, I);
  MPT_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
}

template <class T>
void relu2_forward(T* out, const T* x, size_t n, Context& ctx) {
  map_op<T, 1>("relu2_forward", out, Inputs<T, 1>{{x}}, n, Relu2Fwd{}, ctx);
}
template <class T>
void relu2_backward(T* dx, const T* x, const T* dout, size_t n, Context& ctx) {
  map_op<T, 2>("relu2_backward", dx, Inputs<T, 2>{{x, dout}}, n, Relu2Bwd{}, ctx);
}

#define MPT_INSTANTIATE_SWIGLU(T)                                    \
  template void swiglu_forward<T>(T*, const T*, int, int, Context&); \
  template void swiglu_backward<T>(T*, const T*, const T*, int, int, Context&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE_SWIGLU)

MPT_INSTANTIATE_ACTIVATION(gelu_forward, gelu_backward)
MPT_INSTANTIATE_ACTIVATION(gelu_erf_forward, gelu_erf_backward)
MPT_INSTANTIATE_ACTIVATION(tanh_forward, tanh_backward)
MPT_INSTANTIATE_ACTIVATION(relu2_forward, relu2_backward)

}  // namespace mptrain::cuda
