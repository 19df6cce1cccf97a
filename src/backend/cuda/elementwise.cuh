// One elementwise kernel shape for gelu, residual and accumulate: out[i] = f(in_0[i], ...,
// in_{NIN-1}[i]) computed in fp32 and stored once in T. 16-byte packs over the aligned body
// when every pointer allows it, then a scalar tail. Aliasing out with an input is allowed:
// each element is read and written by the same thread, read first.
#pragma once
#include <cstddef>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/context.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

template <class T, int NIN>
struct Inputs {
  const T* p[NIN];
};

template <int NIN, class F>
__device__ __forceinline__ float apply_f(const F& f, const float* a) {
  if constexpr (NIN == 1)
    return f(a[0]);
  else
    return f(a[0], a[1]);
}

template <class T, int NIN, class F>
__global__ void map_kernel(T* out, Inputs<T, NIN> in, size_t n, size_t npacks, F f) {
  constexpr int P = kPack<T>;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (size_t i = tid; i < npacks; i += stride) {
    Pack<T> x[NIN];
#pragma unroll
    for (int j = 0; j < NIN; ++j) x[j] = load_pack(in.p[j] + i * P);
    Pack<T> y;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      float a[NIN];
#pragma unroll
      for (int j = 0; j < NIN; ++j) a[j] = to_f32(x[j].v[k]);
      y.v[k] = from_f32<T>(apply_f<NIN>(f, a));
    }
    store_pack(out + i * P, y);
  }
  for (size_t i = npacks * P + tid; i < n; i += stride) {
    float a[NIN];
#pragma unroll
    for (int j = 0; j < NIN; ++j) a[j] = to_f32(in.p[j][i]);
    out[i] = from_f32<T>(apply_f<NIN>(f, a));
  }
}

// 256 threads: a multiple of the warp with room for 8 resident blocks per SM; the grid is
// sized for a grid-stride loop (grid_for).
template <class T, int NIN, class F>
void launch_map(T* out, Inputs<T, NIN> in, size_t n, F f, Context& ctx, const char* name) {
  if (n == 0) return;
  bool vec = aligned16(out);
  for (int j = 0; j < NIN; ++j) vec = vec && aligned16(in.p[j]);
  const size_t npacks = vec ? n / kPack<T> : 0;
  const size_t items = vec ? (npacks > 0 ? npacks : 1) : n;
  const int threads = 256;
  map_kernel<T, NIN, F>
      <<<grid_for(items, threads, ctx.info().sm_count), threads, 0, ctx.stream()>>>(out, in, n, npacks, f);
  MPT_CUDA_CHECK_LAUNCH(name);
}

// A launcher's whole body for an elementwise op: its profiling range, the null-pointer check
// naming it, the launch. gelu, gelu_erf, tanh and the residual sums are this plus a functor.
template <class T, int NIN, class F>
void map_op(const char* name, T* out, Inputs<T, NIN> in, size_t n, F f, Context& ctx) {
  ProfileRange range(name);
  bool pointers = out != nullptr;
  for (int j = 0; j < NIN; ++j) pointers = pointers && in.p[j] != nullptr;
  MPT_CHECK(n == 0 || pointers, std::string("[") + name + "] null pointer, N=" + std::to_string(n));
  launch_map<T, NIN>(out, in, n, f, ctx, name);
}

}  // namespace mptrain::cuda

// An activation's forward(out, inp, N) and backward(dinp, saved, dout, N) launchers,
// instantiated for every storage type.
#define MPT_INSTANTIATE_ACTIVATION_FOR(fwd, bwd, T)        \
  template void fwd<T>(T*, const T*, size_t, Context&); \
  template void bwd<T>(T*, const T*, const T*, size_t, Context&);
#define MPT_INSTANTIATE_ACTIVATION(fwd, bwd)         \
  MPT_INSTANTIATE_ACTIVATION_FOR(fwd, bwd, float) \
  MPT_INSTANTIATE_ACTIVATION_FOR(fwd, bwd, Bf16)  \
  MPT_INSTANTIATE_ACTIVATION_FOR(fwd, bwd, Fp16)
