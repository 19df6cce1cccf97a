// Fused cross-entropy: one 512-thread block per row. Pass 1 keeps a running (max, sum of
// exp(z - max)) per thread over [0, V) (the online softmax: one read of the row), merged
// across the block; pass 2 writes the gradient over [0, Vp). The target's logit is read by
// every thread before the first barrier, so no write of pass 2 (dlogits may alias logits)
// can precede it; in pass 2 each element is read and then written by the same thread.
#include <cfloat>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/crossentropy.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/online_softmax.cuh"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

constexpr int kThreads = 512;  // Vp = 50304 is ~98 elements (12 packs) per thread

template <class T, int W>
__global__ void crossentropy_kernel(float* losses, T* dlogits, const T* logits, const int* targets,
                                    const float* dloss, int V, int Vp) {
  __shared__ MaxSum red[kThreads / 32];
  const int n = blockIdx.x;
  const size_t off = static_cast<size_t>(n) * Vp;  // N·Vp passes 2^31 at GPT-2 sizes
  const T* z = logits + off;
  const int target = targets[n];
  if (target < 0 || target >= V) {  // uniform over the block: the whole block leaves together
    if (threadIdx.x == 0) losses[n] = target < 0 ? 0.0f : NAN;
    if (dlogits)
      for (int j = threadIdx.x; j < Vp; j += blockDim.x) dlogits[off + j] = from_f32<T>(0.0f);
    return;
  }
  const float zt = to_f32(z[target]);
  MaxSum p{-INFINITY, 0.0f};
  const int vpacks = V / W;  // packs entirely inside [0, V)
  for (int i = threadIdx.x; i < vpacks; i += blockDim.x) {
    if constexpr (W == 1) {
      online_add(p, to_f32(z[i]));
    } else {
      const Pack<T> x = load_pack(z + static_cast<size_t>(i) * W);
#pragma unroll
      for (int k = 0; k < W; ++k) online_add(p, to_f32(x.v[k]));
    }
  }
  for (int j = vpacks * W + threadIdx.x; j < V; j += blockDim.x) online_add(p, to_f32(z[j]));
  p = block_merge(p, red);
  // Every thread now holds the row's (max, sum); the barrier above also orders the read of
  // z[target] before any write below.
  if (threadIdx.x == 0) losses[n] = p.m + logf(p.s) - zt;
  if (!dlogits) return;
  const float g = dloss[n];
  const float scale = g / p.s;
  T* dz = dlogits + off;
  // Vp % W == 0 on the packed path, so packs cover [0, Vp) exactly.
  for (int i = threadIdx.x; i < Vp / W; i += blockDim.x) {
    const int j0 = i * W;
    if constexpr (W == 1) {
      const float d = j0 < V ? expf(to_f32(z[j0]) - p.m) * scale - (j0 == target ? g : 0.0f) : 0.0f;
      dz[j0] = from_f32<T>(d);
    } else {
      const Pack<T> x = load_pack(z + j0);
      Pack<T> y;
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const int j = j0 + k;
        const float d = j < V ? expf(to_f32(x.v[k]) - p.m) * scale - (j == target ? g : 0.0f) : 0.0f;
        y.v[k] = from_f32<T>(d);
      }
      store_pack(dz + j0, y);
    }
  }
}

std::string dims(int N, int V, int Vp) {
  return "N=" + std::to_string(N) + " V=" + std::to_string(V) + " Vp=" + std::to_string(Vp);
}

}  // namespace

template <class T>
void crossentropy_forward_backward(float* losses, T* dlogits, const T* logits, const int* targets,
                                   const float* dloss, int N, int V, int Vp, Context& ctx) {
  MPT_PROFILE_RANGE("crossentropy_forward_backward");
  MPT_CHECK(N >= 0 && V > 0 && Vp >= V, "[crossentropy] bad size: " + dims(N, V, Vp));
  if (N == 0) return;
  MPT_CHECK(losses && logits && targets, "[crossentropy] null pointer: " + dims(N, V, Vp));
  MPT_CHECK(dlogits == nullptr || dloss != nullptr,
            "[crossentropy] dloss is required when dlogits is requested: " + dims(N, V, Vp));
  constexpr int P = kPack<T>;
  const bool vec = Vp % P == 0 && aligned16(logits) && (dlogits == nullptr || aligned16(dlogits));
  // One block per row: rows are independent and N (= B·T) is thousands, enough to fill the GPU.
  if (vec)
    crossentropy_kernel<T, P>
        <<<N, kThreads, 0, ctx.stream()>>>(losses, dlogits, logits, targets, dloss, V, Vp);
  else
    crossentropy_kernel<T, 1>
        <<<N, kThreads, 0, ctx.stream()>>>(losses, dlogits, logits, targets, dloss, V, Vp);
  MPT_CUDA_CHECK_LAUNCH("crossentropy_kernel");
}

#define MPT_INSTANTIATE(T)                                                                                 \
  template void crossentropy_forward_backward<T>(float*, T*, const T*, const int*, const float*, int, int, \
                                                 int, Context&);
MPT_INSTANTIATE(float)
MPT_INSTANTIATE(Bf16)
MPT_INSTANTIATE(Fp16)
#undef MPT_INSTANTIATE

}  // namespace mptrain::cuda
