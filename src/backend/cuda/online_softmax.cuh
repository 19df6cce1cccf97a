// The online softmax's running (max, sum of exp(x - max)) and its block-wide merge, shared by
// the fused cross-entropy and the softmax kernel. Included by .cu files only.
#pragma once
#include <cuda_runtime.h>

namespace mptrain::cuda {

struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum online_merge(MaxSum a, MaxSum b) {
  if (a.m == -INFINITY) return b;  // an empty partial (no elements yet) is the identity
  if (b.m == -INFINITY) return a;
  const float m = fmaxf(a.m, b.m);
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ void online_add(MaxSum& p, float z) {
  if (z > p.m) {
    p.s = p.s * expf(p.m - z) + 1.0f;  // exp(-inf) = 0 on the first element
    p.m = z;
  } else {
    p.s += expf(z - p.m);
  }
}

// Merges every thread's partial; returns the row's (max, sum) to every thread. Reached by all
// threads of the block (one barrier); `red` holds blockDim/32 entries (at most 32).
__device__ __forceinline__ MaxSum block_merge(MaxSum p, MaxSum* red) {
  for (int o = 16; o > 0; o >>= 1)
    p = online_merge(p, {__shfl_xor_sync(0xffffffffu, p.m, o), __shfl_xor_sync(0xffffffffu, p.s, o)});
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) red[warp] = p;
  __syncthreads();
  p = lane < warps ? red[lane] : MaxSum{-INFINITY, 0.0f};
  for (int o = 16; o > 0; o >>= 1)
    p = online_merge(p, {__shfl_xor_sync(0xffffffffu, p.m, o), __shfl_xor_sync(0xffffffffu, p.s, o)});
  return p;
}

}  // namespace mptrain::cuda
