// Rotary position embeddings (rope.h): one thread per channel pair (row, head, i), grid-stride.
// The angle is computed where it is used, as the CPU tables it (fp32 powf, product, cosf and sinf,
// the accurate forms), so the two agree within a few ulp of the angle's cos and sin.
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "backend/cuda/rope.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void rope_kernel(T* x, size_t pairs, int W, int Tn, int heads, int head_size, float theta,
                            float sign) {
  const int half = head_size / 2;
  const size_t per_row = static_cast<size_t>(heads) * half;
  for (size_t p = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs;
       p += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = p / per_row;
    const int h = static_cast<int>(p % per_row) / half, i = static_cast<int>(p % per_row) % half;
    const float inv_freq = 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_size));
    const float angle = static_cast<float>(r % Tn) * inv_freq;
    const float c = cosf(angle), s = sign * sinf(angle);
    T* a = x + r * W + static_cast<size_t>(h) * head_size + i;
    const float ai = to_f32(a[0]), bi = to_f32(a[half]);
    a[0] = from_f32<T>(ai * c - bi * s);
    a[half] = from_f32<T>(bi * c + ai * s);
  }
}

}  // namespace

template <class T>
void rope(T* x, int rows, int W, int T_, int heads, int head_size, float theta, bool inverse, Context& ctx) {
  MPT_PROFILE_RANGE("rope");
  MPT_CHECK(rows >= 0 && T_ > 0 && rows % T_ == 0 && head_size > 0 && head_size % 2 == 0 && heads > 0 &&
                static_cast<long long>(heads) * head_size <= W,
            "[rope] bad sizes: rows=" + std::to_string(rows) + " W=" + std::to_string(W) +
                " T=" + std::to_string(T_) + " heads=" + std::to_string(heads) +
                " head_size=" + std::to_string(head_size));
  const size_t pairs = static_cast<size_t>(rows) * heads * (head_size / 2);
  if (pairs == 0) return;
  MPT_CHECK(x != nullptr, "[rope] null pointer");
  rope_kernel<T><<<grid_for(pairs, kThreads, ctx.info().sm_count), kThreads, 0, ctx.stream()>>>(
      x, pairs, W, T_, heads, head_size, theta, inverse ? -1.0f : 1.0f);
  MPT_CUDA_CHECK_LAUNCH("rope_kernel");
}

#define MPT_INSTANTIATE(T) template void rope<T>(T*, int, int, int, int, int, float, bool, Context&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE)

}  // namespace mptrain::cuda
