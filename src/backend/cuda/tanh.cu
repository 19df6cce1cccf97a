// tanh forward and backward (tanh.h): tanhf (not an approximation), so fp32 stays within an ulp
// or two of the CPU's libm; the backward reads the forward's output, as cpu/tanh.cpp.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/profiling.h"
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
  MPT_PROFILE_RANGE("tanh_forward");
  MPT_CHECK(N == 0 || (out && inp), "[tanh_forward] null pointer, N=" + std::to_string(N));
  launch_map<T, 1>(out, Inputs<T, 1>{{inp}}, N, TanhFwd{}, ctx, "tanh_forward");
}

template <class T>
void tanh_backward(T* dinp, const T* out, const T* dout, size_t N, Context& ctx) {
  MPT_PROFILE_RANGE("tanh_backward");
  MPT_CHECK(N == 0 || (dinp && out && dout), "[tanh_backward] null pointer, N=" + std::to_string(N));
  launch_map<T, 2>(dinp, Inputs<T, 2>{{out, dout}}, N, TanhBwd{}, ctx, "tanh_backward");
}

#define MPT_INSTANTIATE(T)                                       \
  template void tanh_forward<T>(T*, const T*, size_t, Context&); \
  template void tanh_backward<T>(T*, const T*, const T*, size_t, Context&);
MPT_INSTANTIATE(float)
MPT_INSTANTIATE(Bf16)
MPT_INSTANTIATE(Fp16)
#undef MPT_INSTANTIATE

}  // namespace mptrain::cuda
