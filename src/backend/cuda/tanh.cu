// tanh forward and backward (tanh.h): tanhf (not an approximation), so fp32 stays within an ulp
// or two of the CPU's libm; the backward reads the forward's output, as cpu/tanh.cpp.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/tanh.h"

namespace mptrain::cuda {

namespace {

struct TanhFwd {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct TanhBwd {
  __device__ float operator()(float y, float dy) const { return (1.0f - y * y) * dy; }
};

}  // namespace

template <class T>
void tanh_forward(T* out, const T* inp, size_t N, Context& ctx) {
  map_op<T, 1>("tanh_forward", out, Inputs<T, 1>{{inp}}, N, TanhFwd{}, ctx);
}

template <class T>
void tanh_backward(T* dinp, const T* out, const T* dout, size_t N, Context& ctx) {
  map_op<T, 2>("tanh_backward", dinp, Inputs<T, 2>{{out, dout}}, N, TanhBwd{}, ctx);
}

MPT_INSTANTIATE_ACTIVATION(tanh_forward, tanh_backward)

}  // namespace mptrain::cuda
