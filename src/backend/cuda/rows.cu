// Row gather / scatter-add / arg-max kernels (rows.h). Gather and scatter: one thread per
// element, grid-stride (rows are C-contiguous, so warps read and write coalesced runs).
// Arg-max: one warp per row, each lane a strided pass keeping (value, first index), then a
// shuffle merge that prefers the larger value and, on equal values, the smaller index: the
// CPU's left-to-right "x > best" scan gives the same first maximum.
#include <climits>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "backend/cuda/rows.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

// An index outside [0, n) is reported (Context::kFaultRowIndex) and its row left alone.
__device__ __forceinline__ bool row_ok(int row, int n, int* faults) {
  if (row >= 0 && row < n) return true;
  atomicOr(faults, Context::kFaultRowIndex);
  return false;
}

template <class T>
__global__ void gather_rows_kernel(T* out, const T* in, const int* rows, int R, int R_out, int R_in, int C,
                                   int* faults) {
  const size_t total = static_cast<size_t>(R_out) * C;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / C, c = i % C;
    const bool take = r < static_cast<size_t>(R) && row_ok(rows[r], R_in, faults);
    out[i] = take ? in[static_cast<size_t>(rows[r]) * C + c] : from_f32<T>(0.0f);
  }
}

template <class T>
__global__ void scatter_add_rows_kernel(T* dst, const T* src, const int* rows, int R, int R_dst, int C,
                                        int* faults) {
  const size_t total = static_cast<size_t>(R) * C;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / C, c = i % C;
    if (!row_ok(rows[r], R_dst, faults)) continue;
    T* d = dst + static_cast<size_t>(rows[r]) * C + c;
    *d = from_f32<T>(to_f32(*d) + to_f32(src[i]));
  }
}

// cu[0] = 0, each cu[b+1] - cu[b] in [1, T], cu[B] = rows; else Context::kFaultPacking. One warp.
__global__ void check_packing_kernel(const int* cu, int B, int T, int rows, int* faults) {
  bool bad = threadIdx.x == 0 && (cu[0] != 0 || cu[B] != rows);
  for (int b = static_cast<int>(threadIdx.x); b < B; b += 32) {
    const int len = cu[b + 1] - cu[b];
    bad |= len < 1 || len > T;
  }
  if (bad) atomicOr(faults, Context::kFaultPacking);
}

// (a, ia) beats (b, ib): larger, or equal and earlier.
__device__ __forceinline__ bool beats(float a, int ia, float b, int ib) {
  return a > b || (a == b && ia < ib);
}

template <class T>
__global__ void row_argmax_kernel(int* best, const T* x, int R, int V, int stride) {
  const int warps = blockDim.x / 32;
  const int lane = threadIdx.x & 31;
  for (int r = blockIdx.x * warps + threadIdx.x / 32; r < R; r += gridDim.x * warps) {
    const T* row = x + static_cast<size_t>(r) * stride;
    // Each lane starts from its first element (so a row of -inf still yields index 0); a lane
    // past V starts with nothing and loses every merge.
    float v = lane < V ? to_f32(row[lane]) : -INFINITY;
    int idx = lane < V ? lane : INT_MAX;
    for (int j = lane + 32; j < V; j += 32) {
      const float xj = to_f32(row[j]);
      if (xj > v) v = xj, idx = j;
    }
    for (int off = 16; off > 0; off >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, v, off);
      const int oi = __shfl_xor_sync(0xffffffffu, idx, off);
      if (beats(ov, oi, v, idx)) v = ov, idx = oi;
    }
    if (lane == 0) best[r] = idx;
  }
}

std::string dims(const char* op, int R, int C) {
  return std::string("[") + op + "] R=" + std::to_string(R) + " C=" + std::to_string(C);
}

}  // namespace

template <class T>
void gather_rows(T* out, const T* in, const int* rows, int R, int R_out, int R_in, int C, Context& ctx) {
  MPT_PROFILE_RANGE("gather_rows");
  MPT_CHECK(R >= 0 && R_out >= R && C > 0, dims("gather_rows", R, C) + " R_out=" + std::to_string(R_out) +
                                               ": bad size (0 <= R <= R_out, C > 0)");
  if (R_out == 0) return;
  MPT_CHECK(out && (R == 0 || (in && rows)), dims("gather_rows", R, C) + ": null pointer");
  const int threads = 256;  // a warp multiple; grid-stride over (row, channel)
  gather_rows_kernel<T>
      <<<grid_for(static_cast<size_t>(R_out) * C, threads, ctx.info().sm_count), threads, 0, ctx.stream()>>>(
          out, in, rows, R, R_out, R_in, C, ctx.faults());
  MPT_CUDA_CHECK_LAUNCH("gather_rows_kernel");
}

template <class T>
void scatter_add_rows(T* dst, const T* src, const int* rows, int R, int R_dst, int C, Context& ctx) {
  MPT_PROFILE_RANGE("scatter_add_rows");
  MPT_CHECK(R >= 0 && C > 0, dims("scatter_add_rows", R, C) + ": bad size");
  if (R == 0) return;
  MPT_CHECK(dst && src && rows, dims("scatter_add_rows", R, C) + ": null pointer");
  const int threads = 256;  // a warp multiple; grid-stride over (row, channel)
  scatter_add_rows_kernel<T>
      <<<grid_for(static_cast<size_t>(R) * C, threads, ctx.info().sm_count), threads, 0, ctx.stream()>>>(
          dst, src, rows, R, R_dst, C, ctx.faults());
  MPT_CUDA_CHECK_LAUNCH("scatter_add_rows_kernel");
}

template <class T>
void row_argmax(int* best, const T* x, int R, int V, int stride, Context& ctx) {
  MPT_PROFILE_RANGE("row_argmax");
  MPT_CHECK(R >= 0 && V > 0 && stride >= V, dims("row_argmax", R, V) + " stride=" + std::to_string(stride) +
                                                ": bad size (V > 0, stride >= V)");
  if (R == 0) return;
  MPT_CHECK(best && x, dims("row_argmax", R, V) + ": null pointer");
  const int threads = 256;  // 8 warps, one row per warp at a time
  const unsigned grid = grid_for(static_cast<size_t>(R) * 32, threads, ctx.info().sm_count);
  row_argmax_kernel<T><<<grid, threads, 0, ctx.stream()>>>(best, x, R, V, stride);
  MPT_CUDA_CHECK_LAUNCH("row_argmax_kernel");
}

void check_packing(const int* cu_seqlens, int B, int T, int rows, Context& ctx) {
  MPT_PROFILE_RANGE("check_packing");
  MPT_CHECK(cu_seqlens && B > 0 && T > 0, "[check_packing] needs cu_seqlens and B, T > 0");
  check_packing_kernel<<<1, 32, 0, ctx.stream()>>>(cu_seqlens, B, T, rows, ctx.faults());
  MPT_CUDA_CHECK_LAUNCH("check_packing_kernel");
}

#define MPT_INSTANTIATE(T)                                                              \
  template void gather_rows<T>(T*, const T*, const int*, int, int, int, int, Context&); \
  template void scatter_add_rows<T>(T*, const T*, const int*, int, int, int, Context&); \
  template void row_argmax<T>(int*, const T*, int, int, int, Context&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE)

}  // namespace mptrain::cuda
