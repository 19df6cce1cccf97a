// FP8's casts and amax on the GPU (backend/cuda/fp8.h).
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/fp8.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

struct Fp8CastOp {
  float scale;
  Fp8Format format;
  bool saturate;
  __device__ float operator()(float x) const { return fp8_round(x * scale, format, saturate); }
};

constexpr int kAmaxThreads = 256;

// |x| as a pattern: for non-negative floats (NaN included) the unsigned order is the value order,
// so the largest pattern is the amax and NaN (0x7fc…) ranks above inf (0x7f800000).
__global__ void amax_kernel(uint32_t* out, const float* x, size_t n) {
  __shared__ uint32_t block_max;
  if (threadIdx.x == 0) block_max = 0;
  __syncthreads();
  uint32_t m = 0;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    m = max(m, __float_as_uint(x[i]) & 0x7fffffffu);
  atomicMax(&block_max, m);
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(out, block_max);
}

}  // namespace

template <class T>
void fp8_cast(T* out, const T* x, size_t n, float scale, Fp8Format format, bool saturate, Context& ctx) {
  map_op<T, 1>("fp8_cast", out, Inputs<T, 1>{{x}}, n, Fp8CastOp{scale, format, saturate}, ctx);
}

void amax_bits(uint32_t* amax_bits, const float* x, size_t n, Context& ctx) {
  ProfileRange range("amax");
  MPT_CHECK(amax_bits && (x || n == 0), "[amax] null pointer, n=" + std::to_string(n));
  MPT_CUDA_CHECK(cudaMemsetAsync(amax_bits, 0, sizeof(uint32_t), ctx.stream()));
  if (n == 0) return;
  amax_kernel<<<grid_for(n, kAmaxThreads, ctx.info().sm_count), kAmaxThreads, 0, ctx.stream()>>>(amax_bits, x,
                                                                                                 n);
  MPT_CUDA_CHECK_LAUNCH("amax_kernel");
}

#define MPT_INSTANTIATE_FP8_CAST(T) \
  template void fp8_cast<T>(T*, const T*, size_t, float, Fp8Format, bool, Context&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE_FP8_CAST)

}  // namespace mptrain::cuda
