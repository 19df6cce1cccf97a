// Device-side helpers shared by the kernels (included by .cu files only): fp32 conversions
// of the storage types, 16-byte packs for vectorised loads and stores, warp and block
// reductions, the packed layout's row → sequence search, and launch-size helpers.
//
// Conversions use core/dtype.h's functions, which are bit-identical on host and device, so a
// kernel's rounding matches the CPU backend's casts exactly.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace mptrain::cuda {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(Bf16 x) { return bf16_to_f32(x); }
__device__ __forceinline__ float to_f32(Fp16 x) { return f16_to_f32(x); }

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ Bf16 from_f32<Bf16>(float x) {
  return f32_to_bf16(x);
}
template <>
__device__ __forceinline__ Fp16 from_f32<Fp16>(float x) {
  return f32_to_f16(x);
}

// 16 bytes of T: 4 floats or 8 16-bit values, moved by one 128-bit load or store.
template <class T>
inline constexpr int kPack = 16 / static_cast<int>(sizeof(T));

template <class T>
struct alignas(16) Pack {
  T v[kPack<T>];
};

template <class T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T>*>(p);
}
template <class T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& x) {
  *reinterpret_cast<Pack<T>*>(p) = x;
}

// Host side: may this pointer be accessed with 16-byte packs?
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the whole block, returned to every thread. Must be reached by every thread of the
// block (it synchronises); `shared` holds one V per warp (32 suffice for 1024 threads). The
// trailing barrier lets the caller reuse `shared` for the next reduction. The xor-butterfly
// order is fixed, so the result is deterministic.
template <class V>
__device__ __forceinline__ V block_sum(V v, V* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : V(0);
  v = warp_sum(v);
  __syncthreads();
  return v;
}

// The packed layout (backend/backend.h's EmbeddingArgs: cu_seqlens [B+1], cu[0] = 0, increasing):
// the sequence b whose rows [cu[b], cu[b+1]) hold `row` (row < cu[B]), by binary search, so a
// kernel over rows needs no per-row table. A few cached loads for the B of a batch.
__device__ __forceinline__ int packed_sequence_of(const int* cu_seqlens, int B, size_t row) {
  int lo = 0, hi = B - 1;  // the largest b with cu[b] <= row lies in [lo, hi]
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (static_cast<size_t>(cu_seqlens[mid]) <= row)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Blocks for a grid-stride loop over `items`: enough to fill the GPU several times over
// (8 blocks of 256 per SM keeps every SM busy with memory traffic), never more than needed.
inline unsigned grid_for(size_t items, int threads, int sm_count) {
  const size_t want = (items + threads - 1) / threads;
  const size_t cap = static_cast<size_t>(sm_count > 0 ? sm_count : 1) * 8;
  const size_t g = want < cap ? want : cap;
  return static_cast<unsigned>(g > 0 ? g : 1);
}

// Expands a launcher's explicit instantiations M(T) for every storage type.
#define MPT_FOR_STORAGE_TYPES(M) M(float) M(Bf16) M(Fp16)

}  // namespace mptrain::cuda
