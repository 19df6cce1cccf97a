// Softmax (one 512-thread block per row: online max/sum over [0,V), then the normalised
// write over [0,Vp)) and the probability-based loss/gradient of the unfused cross-entropy
// (one 256-thread block per row, a plain elementwise pass). Scalar loads: these are the
// reference path, not the fast one.
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/online_softmax.cuh"
#include "backend/cuda/profiling.h"
#include "backend/cuda/softmax.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

constexpr int kSoftmaxThreads = 512;
constexpr int kLossThreads = 256;

template <class T>
__global__ void softmax_kernel(float* probs, const T* logits, int V, int Vp, float inv_t) {
  __shared__ MaxSum red[kSoftmaxThreads / 32];
  const size_t off = static_cast<size_t>(blockIdx.x) * Vp;
  MaxSum p{-INFINITY, 0.0f};
  for (int j = threadIdx.x; j < V; j += blockDim.x) online_add(p, to_f32(logits[off + j]) * inv_t);
  p = block_merge(p, red);
  const float inv_s = 1.0f / p.s;
  for (int j = threadIdx.x; j < Vp; j += blockDim.x)
    probs[off + j] = j < V ? expf(to_f32(logits[off + j]) * inv_t - p.m) * inv_s : 0.0f;
}

template <class T>
__global__ void ce_from_probs_kernel(float* losses, T* dlogits, const float* probs, const int* targets,
                                     const float* dloss, int V, int Vp) {
  const int n = blockIdx.x;
  const size_t off = static_cast<size_t>(n) * Vp;
  const int target = targets[n];
  const bool valid = target >= 0 && target < V;
  if (threadIdx.x == 0) losses[n] = target < 0 ? 0.0f : (valid ? -logf(probs[off + target]) : NAN);
  if (!dlogits) return;
  const float g = valid ? dloss[n] : 0.0f;
  for (int j = threadIdx.x; j < Vp; j += blockDim.x)
    dlogits[off + j] = from_f32<T>(j < V ? g * (probs[off + j] - (j == target ? 1.0f : 0.0f)) : 0.0f);
}

std::string dims(int N, int V, int Vp) {
  return "N=" + std::to_string(N) + " V=" + std::to_string(V) + " Vp=" + std::to_string(Vp);
}

}  // namespace

template <class T>
void softmax_forward(float* probs, const T* logits, int N, int V, int Vp, float temperature, Context& ctx) {
  MPT_PROFILE_RANGE("softmax_forward");
  MPT_CHECK(N >= 0 && V > 0 && Vp >= V, "[softmax_forward] bad size: " + dims(N, V, Vp));
  MPT_CHECK(temperature > 0.0f,
            "[softmax_forward] temperature must be > 0, got " + std::to_string(temperature));
  if (N == 0) return;
  MPT_CHECK(probs && logits, "[softmax_forward] null pointer: " + dims(N, V, Vp));
  softmax_kernel<T><<<N, kSoftmaxThreads, 0, ctx.stream()>>>(probs, logits, V, Vp, 1.0f / temperature);
  MPT_CUDA_CHECK_LAUNCH("softmax_kernel");
}

template <class T>
void crossentropy_from_probs(float* losses, T* dlogits, const float* probs, const int* targets,
                             const float* dloss, int N, int V, int Vp, Context& ctx) {
  MPT_PROFILE_RANGE("crossentropy_from_probs");
  MPT_CHECK(N >= 0 && V > 0 && Vp >= V, "[crossentropy_from_probs] bad size: " + dims(N, V, Vp));
  if (N == 0) return;
  MPT_CHECK(losses && probs && targets && (!dlogits || dloss),
            "[crossentropy_from_probs] null pointer: " + dims(N, V, Vp));
  ce_from_probs_kernel<T>
      <<<N, kLossThreads, 0, ctx.stream()>>>(losses, dlogits, probs, targets, dloss, V, Vp);
  MPT_CUDA_CHECK_LAUNCH("ce_from_probs_kernel");
}

#define MPT_INSTANTIATE(T)                                                                               \
  template void softmax_forward<T>(float*, const T*, int, int, int, float, Context&);                    \
  template void crossentropy_from_probs<T>(float*, T*, const float*, const int*, const float*, int, int, \
                                           int, Context&);
MPT_INSTANTIATE(float)
MPT_INSTANTIATE(Bf16)
MPT_INSTANTIATE(Fp16)
#undef MPT_INSTANTIATE

}  // namespace mptrain::cuda
