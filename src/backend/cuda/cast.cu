// The cast kernel: one thread per element, grid-stride loop so any n fits a bounded grid (256
// threads: a full warp multiple with good occupancy on sm_80/sm_90).
#include <cuda_runtime.h>

#include "backend/cuda/cast.h"
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

__global__ void round_tf32_kernel(float* out, const float* in, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = round_to_tf32(in[i]);
}

unsigned grid_for(size_t n, int threads) {
  const size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 * 4 ? blocks : 65535 * 4);
}

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw_library_error("CUDA", what, cudaGetErrorString(err), __FILE__, __LINE__);
}

}  // namespace

void round_tf32(float* out, const float* in, size_t n, void* stream) {
  if (n == 0) return;
  const int threads = 256;
  round_tf32_kernel<<<grid_for(n, threads), threads, 0, static_cast<cudaStream_t>(stream)>>>(out, in, n);
  check_launch("round_tf32");
}

template <class Out, class In>
void cast(Out* out, const In* in, size_t n, void* stream) {
  if (n == 0) return;
  const int threads = 256;
  cast_kernel<<<grid_for(n, threads), threads, 0, static_cast<cudaStream_t>(stream)>>>(out, in, n);
  check_launch("cast");
}

template void cast<Bf16, float>(Bf16*, const float*, size_t, void*);
template void cast<float, Bf16>(float*, const Bf16*, size_t, void*);
template void cast<Fp16, float>(Fp16*, const float*, size_t, void*);
template void cast<float, Fp16>(float*, const Fp16*, size_t, void*);

}  // namespace mptrain::cuda
