// The cast kernel: one thread per element, grid-stride loop so any n fits a bounded grid (256
// threads: a full warp multiple with good occupancy on sm_80/sm_90).
#include <cuda_runtime.h>

#include "backend/cuda/cast.h"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernel_util.cuh"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

template <class Out, class In>
__global__ void cast_kernel(Out* out, const In* in, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = from_f32<Out>(to_f32(in[i]));
}

struct RoundTf32 {
  __device__ float operator()(float x) const { return round_to_tf32(x); }
};

}  // namespace

void round_tf32(float* out, const float* in, size_t n, Context& ctx) {
  map_op<float, 1>("round_tf32", out, Inputs<float, 1>{{in}}, n, RoundTf32{}, ctx);
}

template <class Out, class In>
void cast(Out* out, const In* in, size_t n, void* stream) {
  if (n == 0) return;
  const int threads = 256;
  const size_t blocks = (n + threads - 1) / threads;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 * 4 ? blocks : 65535 * 4);
  cast_kernel<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(out, in, n);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw_library_error("CUDA", "cast", cudaGetErrorString(err), __FILE__, __LINE__);
}

template void cast<Bf16, float>(Bf16*, const float*, size_t, void*);
template void cast<float, Bf16>(float*, const Bf16*, size_t, void*);
template void cast<Fp16, float>(Fp16*, const float*, size_t, void*);
template void cast<float, Fp16>(float*, const Fp16*, size_t, void*);

}  // namespace mptrain::cuda
