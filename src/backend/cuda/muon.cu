// Muon's elementwise kernels: one grid-stride loop over the matrix's rows·cols elements, the row
// and column recovered per element (the rows of a column block are strided in the parameters).
#include <cuda_runtime.h>

#include "backend/cuda/check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/muon.h"
#include "backend/cuda/profiling.h"

namespace mptrain::cuda {

namespace {

__global__ void muon_momentum_kernel(float* m, const float* grads, float* u, int64_t rows, int64_t cols,
                                     int64_t ld, float mu, bool nesterov, float gs) {
  const int64_t n = rows * cols, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t at = (i / cols) * ld + i % cols;
    const float g = grads[at] * gs;
    const float mi = mu * m[at] + g;
    m[at] = mi;
    u[i] = nesterov ? g + mu * mi : mi;
  }
}

template <class T>
__global__ void muon_update_kernel(float* params, const T* o, int64_t rows, int64_t cols, int64_t ld,
                                   float decay, float step) {
  const int64_t n = rows * cols, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t at = (i / cols) * ld + i % cols;
    params[at] = params[at] * decay + step * to_f32(o[i]);
  }
}

constexpr int kThreads = 256;

}  // namespace

void muon_momentum(float* m, const float* grads, float* u, int64_t rows, int64_t cols, int64_t ld, float mu,
                   bool nesterov, float grad_scale, Context& ctx) {
  MPT_PROFILE_RANGE("muon_momentum");
  const size_t n = static_cast<size_t>(rows * cols);
  if (n == 0) return;
  muon_momentum_kernel<<<grid_for(n, kThreads, ctx.info().sm_count), kThreads, 0, ctx.stream()>>>(
      m, grads, u, rows, cols, ld, mu, nesterov, grad_scale);
  MPT_CUDA_CHECK_LAUNCH("muon_momentum_kernel");
}

template <class T>
void muon_update(float* params, const T* o, int64_t rows, int64_t cols, int64_t ld, float lr,
                 float weight_decay, float scale, Context& ctx) {
  MPT_PROFILE_RANGE("muon_update");
  const size_t n = static_cast<size_t>(rows * cols);
  if (n == 0) return;
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  const float step = static_cast<float>(-static_cast<double>(lr) * scale);
  muon_update_kernel<T><<<grid_for(n, kThreads, ctx.info().sm_count), kThreads, 0, ctx.stream()>>>(
      params, o, rows, cols, ld, decay, step);
  MPT_CUDA_CHECK_LAUNCH("muon_update_kernel");
}

#define MPT_INSTANTIATE(T) \
  template void muon_update<T>(float*, const T*, int64_t, int64_t, int64_t, float, float, float, Context&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE)
#undef MPT_INSTANTIATE

}  // namespace mptrain::cuda
