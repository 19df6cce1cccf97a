// LayerNorm kernels, and RMSNorm's (rms: the mean taken as 0, no mean term in the backward, no
// bias), a runtime flag uniform over the launch.
// Forward: one warp per row (row statistics need only shuffles, no block barrier), 8 rows per
// 256-thread block. Three passes over the row (sum; squared deviations; normalise), two-pass
// statistics as on the CPU; passes 2 and 3 re-read the row from L1/L2.
// Backward: one block per fixed chunk of rows (chunk bounds depend on N only); a second kernel
// adds the chunk partials of dweight/dbias in chunk order, so the result does not depend on
// timing. Within a chunk, where the row fits the registers of a warp (C ≤ 1024, C a multiple
// of the 16-byte pack), one warp per row: row sums by shuffles only, and each lane
// keeps the dweight/dbias sums of its own channels in registers across its rows; the warps'
// sums meet in shared memory in warp order. Otherwise (the scalar twin) one row at a time per
// block, two block reductions per row. The scalar twin was latency-bound: 0.152 ms at
// N = 8192, C = 768 in bf16 on an H100 (331 GB/s), a fifth of a GPT-2 step's time.
#include <string>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/layernorm.h"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

constexpr int kRowsPerBlock = 8;  // forward: warps per block
constexpr int kMaxChunks = 512;   // backward: about 4 blocks per SM on a 132-SM H100
// backward: 2·C floats of dynamic shared memory plus the 128-byte `red` must fit the 48 KiB a
// block gets without an opt-in; 47 KiB / 8 bytes leaves that room (6144 did not: C > 6112
// failed at launch).
constexpr int kMaxC = 6016;
constexpr int kBwdThreads = 256;  // backward: 8 warps (the warp-per-row kernel's rows in flight)
// warp-per-row backward: values per lane (weights, two sums and the row's dy and x̂ each: 5·32
// floats in registers; C ≤ 1024)
constexpr int kMaxLaneValues = 32;

std::string dims(int N, int C) { return "N=" + std::to_string(N) + " C=" + std::to_string(C); }

// Row n's first element (NormLayout), passed by value to the kernels.
struct RowAt {
  long long groups, stride, C;
  __device__ size_t operator()(int n) const {
    return static_cast<size_t>(groups == 1 ? n * stride : n / groups * stride + n % groups * C);
  }
};
RowAt row_at(const NormLayout& rows, int C) {
  MPT_CHECK(rows.groups >= 1 && (rows.stride == 0 || rows.stride >= rows.groups * C),
            "[layernorm] bad row groups: groups=" + std::to_string(rows.groups) +
                " stride=" + std::to_string(rows.stride));
  return {rows.groups, rows.stride ? rows.stride : rows.groups * C, C};
}

int chunks_for(int N) { return N < kMaxChunks ? N : kMaxChunks; }

// W: elements per access (kPack<T> or 1).
template <class T, int W>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* a, const T* weight,
                                         const T* bias, int N, int C, float eps, bool rms, RowAt at) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
  if (row >= N) return;  // a whole warp leaves; the kernel has no block barrier
  const size_t off = at(row);
  const T* x = a + off;
  float sum = 0.0f;
  for (int c = lane * W; c < (rms ? 0 : C); c += 32 * W) {
    if constexpr (W == 1) {
      sum += to_f32(x[c]);
    } else {
      const Pack<T> p = load_pack(x + c);
#pragma unroll
      for (int k = 0; k < W; ++k) sum += to_f32(p.v[k]);
    }
  }
  const float inv_c = 1.0f / static_cast<float>(C);
  const float m = warp_sum(sum) * inv_c;
  float sq = 0.0f;
  for (int c = lane * W; c < C; c += 32 * W) {
    if constexpr (W == 1) {
      const float d = to_f32(x[c]) - m;
      sq += d * d;
    } else {
      const Pack<T> p = load_pack(x + c);
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const float d = to_f32(p.v[k]) - m;
        sq += d * d;
      }
    }
  }
  const float s = 1.0f / sqrtf(warp_sum(sq) * inv_c + eps);
  for (int c = lane * W; c < C; c += 32 * W) {
    if constexpr (W == 1) {
      out[off + c] = from_f32<T>((to_f32(x[c]) - m) * s * to_f32(weight[c]) + (rms ? 0.0f : to_f32(bias[c])));
    } else {
      const Pack<T> p = load_pack(x + c), pw = load_pack(weight + c);
      Pack<T> pb{};
      if (!rms) pb = load_pack(bias + c);
      Pack<T> y;
#pragma unroll
      for (int k = 0; k < W; ++k)
        y.v[k] = from_f32<T>((to_f32(p.v[k]) - m) * s * to_f32(pw.v[k]) + to_f32(pb.v[k]));
      store_pack(out + off + c, y);
    }
  }
  if (lane == 0) {
    if (!rms) mean[row] = m;
    rstd[row] = s;
  }
}

template <class T>
void launch_forward(T* out, float* mean, float* rstd, const T* a, const T* weight, const T* bias, int N,
                    int C, float eps, bool rms, RowAt at, Context& ctx) {
  constexpr int P = kPack<T>;
  const bool vec = C % P == 0 && at.stride % P == 0 && aligned16(out) && aligned16(a) && aligned16(weight) &&
                   aligned16(bias);
  const unsigned grid = static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock);
  const int threads = 32 * kRowsPerBlock;
  if (vec)
    layernorm_forward_kernel<T, P>
        <<<grid, threads, 0, ctx.stream()>>>(out, mean, rstd, a, weight, bias, N, C, eps, rms, at);
  else
    layernorm_forward_kernel<T, 1>
        <<<grid, threads, 0, ctx.stream()>>>(out, mean, rstd, a, weight, bias, N, C, eps, rms, at);
  MPT_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
}

template <class T>
__global__ void layernorm_backward_kernel(T* dinp, float* partial, const T* dout, const T* inp,
                                          const T* weight, const float* mean, const float* rstd, int N, int C,
                                          int chunks, bool rms, RowAt at, bool accumulate) {
  extern __shared__ float acc[];  // dweight partial [C], then dbias partial [C]
  __shared__ float red[32];
  float* dw = acc;
  float* db = acc + C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) dw[c] = db[c] = 0.0f;  // each thread its own c
  const int k = blockIdx.x;
  const int n0 = static_cast<int>(static_cast<long long>(N) * k / chunks);
  const int n1 = static_cast<int>(static_cast<long long>(N) * (k + 1) / chunks);
  const float inv_c = 1.0f / static_cast<float>(C);
  for (int n = n0; n < n1; ++n) {  // uniform over the block: every thread reaches block_sum
    const size_t off = at(n);
    const float m = rms ? 0.0f : mean[n], s = rstd[n];
    float sg = 0.0f, sgn = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      const float g = to_f32(weight[c]) * to_f32(dout[off + c]);
      sg += g;
      sgn += g * (to_f32(inp[off + c]) - m) * s;
    }
    const float sum_g = block_sum(sg, red);  // every thread takes part, whatever the norm
    const float mg = rms ? 0.0f : sum_g * inv_c;
    const float mgn = block_sum(sgn, red) * inv_c;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      const float dy = to_f32(dout[off + c]);
      const float norm = (to_f32(inp[off + c]) - m) * s;
      const float dx = s * (to_f32(weight[c]) * dy - mg - norm * mgn);
      // in place (dinp = dout, !accumulate): this thread read dout[off + c] above
      dinp[off + c] = from_f32<T>((accumulate ? to_f32(dinp[off + c]) : 0.0f) + dx);
      dw[c] += dy * norm;
      db[c] += dy;
    }
  }
  float* out = partial + static_cast<size_t>(k) * 2 * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    out[c] = dw[c];
    out[C + c] = db[c];
  }
}

// Lane l owns the packs j·32 + l (j < P) of every row: P·W weights, dweight and dbias sums in
// registers (P a template argument so that the arrays stay in registers). The row's dy and x are
// read again for the second pass (from L1: the warp just read them) rather than kept: keeping
// them took 152 registers at C = 768, one 8-warp block per SM, and 0.12 ms a call at N = 16384 on
// the H200 (~850 GB/s); two blocks per SM hide more of the memory's latency.
template <class T, int P>
__global__ void __launch_bounds__(kBwdThreads, 2)
    layernorm_backward_warp_kernel(T* dinp, float* partial, const T* dout, const T* inp, const T* weight,
                                   const float* mean, const float* rstd, int N, int C, int chunks, bool rms,
                                   RowAt at, bool accumulate) {
  constexpr int W = kPack<T>;
  constexpr int kWarps = kBwdThreads / 32;
  extern __shared__ float acc[];  // dweight partial [C], then dbias partial [C]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float wt[P][W], dw[P][W], db[P][W];
#pragma unroll
  for (int j = 0; j < P; ++j) {
    const int c = (j * 32 + lane) * W;
    Pack<T> pw{};
    if (c < C) pw = load_pack(weight + c);
#pragma unroll
    for (int k = 0; k < W; ++k) wt[j][k] = to_f32(pw.v[k]), dw[j][k] = db[j][k] = 0.0f;
  }
  const int chunk = blockIdx.x;
  const int n0 = static_cast<int>(static_cast<long long>(N) * chunk / chunks);
  const int n1 = static_cast<int>(static_cast<long long>(N) * (chunk + 1) / chunks);
  const float inv_c = 1.0f / static_cast<float>(C);
  for (int n = n0 + warp; n < n1; n += kWarps) {  // whole warps: the shuffles see every lane
    const size_t off = at(n);
    const float m = rms ? 0.0f : mean[n], s = rstd[n];
    float sg = 0.0f, sgn = 0.0f;
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const int c = (j * 32 + lane) * W;
      if (c >= C) continue;
      const Pack<T> py = load_pack(dout + off + c), px = load_pack(inp + off + c);
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const float g = wt[j][k] * to_f32(py.v[k]);
        sg += g;
        sgn += g * ((to_f32(px.v[k]) - m) * s);
      }
    }
    const float mg = rms ? 0.0f : warp_sum(sg) * inv_c;  // the branch is uniform over the warp
    const float mgn = warp_sum(sgn) * inv_c;
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const int c = (j * 32 + lane) * W;
      if (c >= C) continue;
      const Pack<T> py = load_pack(dout + off + c), px = load_pack(inp + off + c);
      Pack<T> pd = py;  // overwritten below where !accumulate (dinp may then be dout)
      if (accumulate) pd = load_pack(dinp + off + c);
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const float dy = to_f32(py.v[k]);
        const float xn = (to_f32(px.v[k]) - m) * s;
        const float dx = s * (wt[j][k] * dy - mg - xn * mgn);
        pd.v[k] = from_f32<T>((accumulate ? to_f32(pd.v[k]) : 0.0f) + dx);
        dw[j][k] += dy * xn;
        db[j][k] += dy;
      }
      store_pack(dinp + off + c, pd);
    }
  }
  for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) acc[c] = 0.0f;
  __syncthreads();
  for (int w = 0; w < kWarps; ++w) {  // warp order: the same sums in the same order every run
    if (warp == w) {
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const int c = (j * 32 + lane) * W;
        if (c >= C) continue;
#pragma unroll
        for (int k = 0; k < W; ++k) acc[c + k] += dw[j][k], acc[C + c + k] += db[j][k];
      }
    }
    __syncthreads();
  }
  float* out = partial + static_cast<size_t>(chunk) * 2 * C;
  for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) out[c] = acc[c];
}

// Adds the chunk partials, a [chunks, 2C] matrix ([dweight | dbias] per chunk): a block takes 32
// columns; its warp g sums chunks g, g + 8, ... of them (coalesced across the lanes, 8 loads in
// flight per lane), then the 8 warp sums are added in warp order. One thread per column walking
// all chunks (the first version) was latency-bound: ~0.1 ms of the 0.14 ms backward at C = 768.
template <class T>
__global__ void layernorm_param_grad_kernel(T* dweight, T* dbias, const float* partial, int C, int chunks) {
  constexpr int kGroups = kBwdThreads / 32;
  __shared__ float part[kGroups][32];
  const int x = threadIdx.x & 31, g = threadIdx.x >> 5;
  const int col = blockIdx.x * 32 + x;
  float sum = 0.0f;
  if (col < 2 * C) {
#pragma unroll 8
    for (int k = g; k < chunks; k += kGroups) sum += partial[static_cast<size_t>(k) * 2 * C + col];
  }
  part[g][x] = sum;
  __syncthreads();
  if (g != 0 || col >= 2 * C) return;
  float t = 0.0f;
#pragma unroll
  for (int i = 0; i < kGroups; ++i) t += part[i][x];
  if (col < C)
    dweight[col] = from_f32<T>(to_f32(dweight[col]) + t);
  else if (dbias)  // RMSNorm has none
    dbias[col - C] = from_f32<T>(to_f32(dbias[col - C]) + t);
}

// Calls f(std::integral_constant<int, P>) with P = packs (1 ≤ packs ≤ 8).
template <int P, class F>
void with_packs(int packs, F&& f) {
  if constexpr (P < 8) {
    if (packs > P) return with_packs<P + 1>(packs, f);
  }
  f(std::integral_constant<int, P>{});
}

}  // namespace

template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N,
                       int C, float eps, bool rms, Context& ctx, const NormLayout& rows) {
  MPT_PROFILE_RANGE("layernorm_forward");
  MPT_CHECK(N >= 0 && C > 0, "[layernorm_forward] bad size: " + dims(N, C));
  MPT_CHECK(eps >= 0.0f, "[layernorm_forward] eps must be >= 0, got " + std::to_string(eps));
  if (N == 0) return;
  MPT_CHECK(out && (rms || (mean && bias)) && rstd && inp && weight,
            "[layernorm_forward] null pointer: " + dims(N, C));
  launch_forward<T>(out, mean, rstd, inp, weight, bias, N, C, eps, rms, row_at(rows, C), ctx);
}

size_t layernorm_backward_scratch_floats(int N, int C) {
  return N > 0 && C > 0 ? static_cast<size_t>(chunks_for(N)) * 2 * C : 0;
}

template <class T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, float* scratch, int N, int C, bool rms,
                        Context& ctx, const NormLayout& rows) {
  MPT_PROFILE_RANGE("layernorm_backward");
  MPT_CHECK(N >= 0 && C > 0 && C <= kMaxC,
            "[layernorm_backward] bad size (C <= " + std::to_string(kMaxC) + "): " + dims(N, C));
  if (N == 0) return;
  MPT_CHECK(dinp && dweight && (rms || (dbias && mean)) && dout && inp && weight && rstd && scratch,
            "[layernorm_backward] null pointer: " + dims(N, C));
  const int chunks = chunks_for(N);
  const int threads = kBwdThreads;  // one block per row chunk
  const size_t smem = 2 * static_cast<size_t>(C) * sizeof(float);
  constexpr int W = kPack<T>;
  const int packs = (C + 32 * W - 1) / (32 * W);  // per lane, in the warp-per-row kernel
  const RowAt at = row_at(rows, C);
  const bool warp_rows = C % W == 0 && at.stride % W == 0 && packs * W <= kMaxLaneValues && aligned16(dinp) &&
                         aligned16(dout) && aligned16(inp) && aligned16(weight);
  if (warp_rows) {
    auto launch = [&](auto p) {
      constexpr int P = decltype(p)::value;
      if constexpr (P * W <= kMaxLaneValues)
        layernorm_backward_warp_kernel<T, P><<<chunks, threads, smem, ctx.stream()>>>(
            dinp, scratch, dout, inp, weight, mean, rstd, N, C, chunks, rms, at, rows.accumulate);
    };
    with_packs<1>(packs, launch);  // P = packs per lane, a compile-time count: the arrays stay in registers
    MPT_CUDA_CHECK_LAUNCH("layernorm_backward_warp_kernel");
  } else {
    layernorm_backward_kernel<T><<<chunks, threads, smem, ctx.stream()>>>(
        dinp, scratch, dout, inp, weight, mean, rstd, N, C, chunks, rms, at, rows.accumulate);
    MPT_CUDA_CHECK_LAUNCH("layernorm_backward_kernel");
  }
  layernorm_param_grad_kernel<T><<<(2 * C + 31) / 32, threads, 0, ctx.stream()>>>(  // 32 columns a block
      dweight, dbias, scratch, C, chunks);
  MPT_CUDA_CHECK_LAUNCH("layernorm_param_grad_kernel");
}

#define MPT_INSTANTIATE(T)                                                                                  \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int, int, float,     \
                                     bool, Context&, const NormLayout&);                                    \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const float*, const float*, \
                                      float*, int, int, bool, Context&, const NormLayout&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE)

}  // namespace mptrain::cuda
