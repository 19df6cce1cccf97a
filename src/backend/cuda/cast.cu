// Elementwise cast kernels: one thread per element, grid-stride loop so any n fits a
// bounded grid (256 threads: a full warp multiple with good occupancy on sm_80/sm_90).
#include <cuda_runtime.h>

#include "backend/cuda/cast.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

template <typename Out, typename In, typename Op>
__global__ void cast_kernel(Out* out, const In* in, size_t n, Op op) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = op(in[i]);
}

struct ToBf16 {
  __device__ Bf16 operator()(float x) const { return f32_to_bf16(x); }
};
struct FromBf16 {
  __device__ float operator()(Bf16 x) const { return bf16_to_f32(x); }
};
struct ToF16 {
  __device__ Fp16 operator()(float x) const { return f32_to_f16(x); }
};
struct FromF16 {
  __device__ float operator()(Fp16 x) const { return f16_to_f32(x); }
};

template <typename Out, typename In, typename Op>
void launch(Out* out, const In* in, size_t n, void* stream, const char* name) {
  if (n == 0) return;
  const int threads = 256;
  const size_t blocks = (n + threads - 1) / threads;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 * 4 ? blocks : 65535 * 4);
  cast_kernel<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(out, in, n, Op{});
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw_library_error("CUDA", name, cudaGetErrorString(err), __FILE__, __LINE__);
}

}  // namespace

void cast_f32_to_bf16(Bf16* out, const float* in, size_t n, void* s) {
  launch<Bf16, float, ToBf16>(out, in, n, s, "cast_f32_to_bf16");
}
void cast_bf16_to_f32(float* out, const Bf16* in, size_t n, void* s) {
  launch<float, Bf16, FromBf16>(out, in, n, s, "cast_bf16_to_f32");
}
void cast_f32_to_f16(Fp16* out, const float* in, size_t n, void* s) {
  launch<Fp16, float, ToF16>(out, in, n, s, "cast_f32_to_f16");
}
void cast_f16_to_f32(float* out, const Fp16* in, size_t n, void* s) {
  launch<float, Fp16, FromF16>(out, in, n, s, "cast_f16_to_f32");
}

}  // namespace mptrain::cuda
