// Fused cross-entropy: one 512-thread block per row. Pass 1 keeps a running (max, sum of
// exp(z - max)) per thread over [0, V) (the online softmax: one read of the row), merged
// across the block; pass 2 writes the gradient over [0, Vp), re-reading the row (mostly from L2:
// four 512-thread blocks per SM). Keeping the row in registers instead (13 packs a thread for
// GPT-2's 100 KB bf16 rows) leaves one block per SM, each row's read, sums and write in
// sequence: 2.5 ms of GPT-2's B=16 step on an H200 against this kernel's 1.7 (2026-11-28).
// The target's logit is read by
// every thread before the first barrier, so no write of pass 2 (dlogits may alias logits)
// can precede it; in pass 2 each element is read and then written by the same thread.
//
// The sampled variant (Sophia's labels) is the same kernel with Sample = true: the same
// per-thread online softmax and block merge (so its loss and gradient are bit for bit the
// unsampled kernel's for target = the drawn label), plus, in pass 1, each warp's (max, sum)
// over every 32 packs it reads ("chunks", kept in shared memory). Between the passes the
// label is drawn as cpu::crossentropy_sampled_forward_backward draws it: the chunks give the
// sums of the CPU's 512-column blocks (rescaled to the row max, in double), thread 0 walks
// them in order with the same double additions (target = u·S, u = core/rng.h's
// label_uniform(seed, counter, row)), and the block's 512 columns (one per thread, re-read
// from cache) are scanned for the first column whose running sum passes the rest. Only the
// fp32 rounding of the block sums and of exp differs from the CPU, so a label can differ only
// where u lies within that rounding of a CDF boundary.
#include <cfloat>
#include <climits>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/crossentropy.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/online_softmax.cuh"
#include "backend/cuda/profiling.h"
#include "core/error.h"
#include "core/rng.h"

namespace mptrain::cuda {

namespace {

constexpr int kThreads = 512;  // Vp = 50304 is ~98 elements (12 packs) per thread
// cpu/crossentropy.cpp's kSumBlock: the sampler walks the same 512-column blocks, and the
// search inside a block gives each of its columns one thread.
constexpr int kSampleBlock = 512;
static_assert(kThreads == kSampleBlock, "one thread per column of a sum block");

// The sampled kernel's dynamic shared memory: the sum of every 512-column block (double),
// then the (max, sum) of every chunk of 32 packs of W columns.
__host__ __device__ inline int sample_blocks(int V) { return (V + kSampleBlock - 1) / kSampleBlock; }
__host__ __device__ inline int sample_chunks(int V, int W) { return ((V + W - 1) / W + 31) / 32; }
inline size_t sample_smem_bytes(int V, int W) {
  return static_cast<size_t>(sample_blocks(V)) * sizeof(double) +
         static_cast<size_t>(sample_chunks(V, W)) * sizeof(MaxSum);
}

// Draws row n's label (module comment); every thread of the block calls it and gets the label
// (-1 when the row's sums are not finite: no label can be drawn). The thread whose column is
// the label returns its logit in z_label. All reads of z happen before the last barrier here,
// so the caller may then overwrite the row (dlogits aliasing logits).
template <class T, int W>
__device__ __forceinline__ int draw_label(const T* z, int V, float row_max, const MaxSum* chunk, double* bsum,
                                          double u, float& z_label) {
  constexpr int kChunksPerBlock = kSampleBlock / (32 * W);
  static_assert(kSampleBlock % (32 * W) == 0, "a sum block is a whole number of chunks");
  __shared__ double warp_total[kThreads / 32];
  __shared__ int warp_first[kThreads / 32], warp_last[kThreads / 32];
  __shared__ double rest_shared;
  __shared__ int block_shared, ok_shared;
  const int blocks = sample_blocks(V), chunks = sample_chunks(V, W);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // 1. Block sums, each chunk rescaled from its own max to the row's (an empty chunk adds 0).
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
    const int c1 = min(chunks, (b + 1) * kChunksPerBlock);
    double s = 0.0;
    for (int c = b * kChunksPerBlock; c < c1; ++c)
      if (chunk[c].m != -INFINITY)
        s += static_cast<double>(chunk[c].s) *
             exp(static_cast<double>(chunk[c].m) - static_cast<double>(row_max));
    bsum[b] = s;
  }
  __syncthreads();
  // 2. The block whose running sum passes u·S: the CPU's loop, the same double additions.
  if (threadIdx.x == 0) {
    double sum = 0.0;
    for (int b = 0; b < blocks; ++b) sum += bsum[b];
    const double target = u * sum;
    double before = 0.0;
    int b = 0;
    for (; b < blocks - 1 && before + bsum[b] <= target; ++b) before += bsum[b];
    block_shared = b;
    rest_shared = target - before;
    ok_shared = isfinite(sum) && sum > 0.0;
  }
  __syncthreads();
  // 3. Inside the block: the first column with mass whose running sum passes the rest, else
  //    (rounding left it just short) the block's last column with mass.
  const int j0 = block_shared * kSampleBlock;
  const int j = j0 + static_cast<int>(threadIdx.x);
  float e = 0.0f;
  z_label = 0.0f;
  if (j < V) {
    z_label = to_f32(z[j]);
    e = expf(z_label - row_max);
  }
  double cum = e;  // inclusive scan over the block, in double
  for (int o = 1; o < 32; o <<= 1) {
    const double t = __shfl_up_sync(0xffffffffu, cum, o);
    if (lane >= o) cum += t;
  }
  if (lane == 31) warp_total[warp] = cum;
  __syncthreads();
  for (int w = 0; w < warp; ++w) cum += warp_total[w];
  int first = e > 0.0f && cum > rest_shared ? j : INT_MAX;
  int last = e > 0.0f ? j : -1;
  for (int o = 16; o > 0; o >>= 1) {
    first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
    last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
  }
  if (lane == 0) {
    warp_first[warp] = first;
    warp_last[warp] = last;
  }
  __syncthreads();
  for (int w = 0; w < kThreads / 32; ++w) {
    first = min(first, warp_first[w]);
    last = max(last, warp_last[w]);
  }
  if (!ok_shared) return -1;
  return first != INT_MAX ? first : last;
}

// Sample = false: targets[n] is read. Sample = true: the label is drawn (draw_label) and
// written to sampled[n]; targets is unused.
template <class T, int W, bool Sample>
__global__ void crossentropy_kernel(float* losses, T* dlogits, const T* logits, const int* targets,
                                    const float* dloss, int V, int Vp, int* sampled, uint64_t seed,
                                    uint64_t counter) {
  __shared__ MaxSum red[kThreads / 32];
  extern __shared__ double sample_smem[];  // Sample only: sample_smem_bytes(V, W)
  const int n = blockIdx.x;
  const size_t off = static_cast<size_t>(n) * Vp;  // N·Vp passes 2^31 at GPT-2 sizes
  const T* z = logits + off;
  int target = 0;
  float zt = 0.0f;
  if constexpr (!Sample) {
    target = targets[n];
    if (target < 0 || target >= V) {  // uniform over the block: the whole block leaves together
      if (threadIdx.x == 0) losses[n] = target < 0 ? 0.0f : NAN;
      if (dlogits)
        for (int j = threadIdx.x; j < Vp; j += blockDim.x) dlogits[off + j] = from_f32<T>(0.0f);
      return;
    }
    zt = to_f32(z[target]);
  }
  MaxSum p{-INFINITY, 0.0f};
  const int vpacks = V / W;  // packs entirely inside [0, V)
  if constexpr (Sample) {
    // The same online_add calls, in the same order per thread, as the loop below; and per pack
    // (the partial last pack included, columns < V only) its (max, sum), merged per warp.
    MaxSum* chunk = reinterpret_cast<MaxSum*>(sample_smem + sample_blocks(V));
    const int packs = (V + W - 1) / W;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int base = 0; base < packs; base += blockDim.x) {  // uniform trip count: warps stay whole
      const int i = base + static_cast<int>(threadIdx.x);
      MaxSum q{-INFINITY, 0.0f};
      if (i < packs) {
        float x[W];
        if constexpr (W == 1) {
          x[0] = to_f32(z[i]);
        } else {
          // The partial pack still lies inside [0, Vp): Vp % W == 0 on the packed path.
          const Pack<T> xp = load_pack(z + static_cast<size_t>(i) * W);
#pragma unroll
          for (int k = 0; k < W; ++k) x[k] = to_f32(xp.v[k]);
        }
        const int live = min(W, V - i * W);
        if (i < vpacks) {
#pragma unroll
          for (int k = 0; k < W; ++k) online_add(p, x[k]);
        }
        float mx = x[0];
#pragma unroll
        for (int k = 1; k < W; ++k)
          if (k < live) mx = fmaxf(mx, x[k]);
        if (mx != -INFINITY) {
          float s = 0.0f;
#pragma unroll
          for (int k = 0; k < W; ++k)
            if (k < live) s += expf(x[k] - mx);
          q = {mx, s};
        }
      }
      for (int o = 16; o > 0; o >>= 1)
        q = online_merge(q, {__shfl_xor_sync(0xffffffffu, q.m, o), __shfl_xor_sync(0xffffffffu, q.s, o)});
      if (lane == 0 && base + warp * 32 < packs) chunk[(base >> 5) + warp] = q;
    }
  } else {
    for (int i = threadIdx.x; i < vpacks; i += blockDim.x) {
      if constexpr (W == 1) {
        online_add(p, to_f32(z[i]));
      } else {
        const Pack<T> x = load_pack(z + static_cast<size_t>(i) * W);
#pragma unroll
        for (int k = 0; k < W; ++k) online_add(p, to_f32(x.v[k]));
      }
    }
  }
  for (int j = vpacks * W + threadIdx.x; j < V; j += blockDim.x) online_add(p, to_f32(z[j]));
  p = block_merge(p, red);
  // Every thread now holds the row's (max, sum); the barrier above also orders the read of
  // z[target] before any write below (and the chunk writes before draw_label's reads).
  if constexpr (Sample) {
    float z_label;
    const double u = label_uniform(seed, counter, static_cast<uint64_t>(n));
    target = draw_label<T, W>(z, V, p.m, reinterpret_cast<const MaxSum*>(sample_smem + sample_blocks(V)),
                              sample_smem, u, z_label);
    if (threadIdx.x == 0) sampled[n] = target;
    if (target < 0) {  // non-finite row: NaN loss and gradient, so that it surfaces
      if (threadIdx.x == 0) losses[n] = NAN;
      for (int j = threadIdx.x; j < Vp; j += blockDim.x) dlogits[off + j] = from_f32<T>(NAN);
      return;
    }
    // Thread 0 writes the loss, as in the unsampled kernel: after the butterfly merges,
    // threads may hold (max, sum) that differ in the last bit (a fused multiply-add takes its
    // operands in lane order), and the loss must be that kernel's bit for bit.
    __shared__ float z_label_shared;
    if (static_cast<int>(threadIdx.x) == target % kSampleBlock) z_label_shared = z_label;
    __syncthreads();
    if (threadIdx.x == 0) losses[n] = p.m + logf(p.s) - z_label_shared;
  } else {
    if (threadIdx.x == 0) losses[n] = p.m + logf(p.s) - zt;
  }
  if (!dlogits) return;
  const float g = dloss[n];
  const float scale = g / p.s;
  T* dz = dlogits + off;
  // Vp % W == 0 on the packed path, so packs cover [0, Vp) exactly.
  for (int i = threadIdx.x; i < Vp / W; i += blockDim.x) {
    const int j0 = i * W;
    if constexpr (W == 1) {
      const float d = j0 < V ? expf(to_f32(z[j0]) - p.m) * scale - (j0 == target ? g : 0.0f) : 0.0f;
      dz[j0] = from_f32<T>(d);
    } else {
      const Pack<T> x = load_pack(z + j0);
      Pack<T> y;
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const int j = j0 + k;
        const float d = j < V ? expf(to_f32(x.v[k]) - p.m) * scale - (j == target ? g : 0.0f) : 0.0f;
        y.v[k] = from_f32<T>(d);
      }
      store_pack(dz + j0, y);
    }
  }
}

std::string dims(int N, int V, int Vp) {
  return "N=" + std::to_string(N) + " V=" + std::to_string(V) + " Vp=" + std::to_string(Vp);
}

}  // namespace

template <class T>
void crossentropy_forward_backward(float* losses, T* dlogits, const T* logits, const int* targets,
                                   const float* dloss, int N, int V, int Vp, Context& ctx) {
  MPT_PROFILE_RANGE("crossentropy_forward_backward");
  MPT_CHECK(N >= 0 && V > 0 && Vp >= V, "[crossentropy] bad size: " + dims(N, V, Vp));
  if (N == 0) return;
  MPT_CHECK(losses && logits && targets, "[crossentropy] null pointer: " + dims(N, V, Vp));
  MPT_CHECK(dlogits == nullptr || dloss != nullptr,
            "[crossentropy] dloss is required when dlogits is requested: " + dims(N, V, Vp));
  constexpr int P = kPack<T>;
  const bool vec = Vp % P == 0 && aligned16(logits) && (dlogits == nullptr || aligned16(dlogits));
  // One block per row: rows are independent and N (= B·T) is thousands, enough to fill the GPU.
  if (vec)
    crossentropy_kernel<T, P, false>
        <<<N, kThreads, 0, ctx.stream()>>>(losses, dlogits, logits, targets, dloss, V, Vp, nullptr, 0, 0);
  else
    crossentropy_kernel<T, 1, false>
        <<<N, kThreads, 0, ctx.stream()>>>(losses, dlogits, logits, targets, dloss, V, Vp, nullptr, 0, 0);
  MPT_CUDA_CHECK_LAUNCH("crossentropy_kernel");
}

template <class T>
void crossentropy_sampled_forward_backward(float* losses, T* dlogits, int* sampled, const T* logits,
                                           const float* dloss, int N, int V, int Vp, uint64_t seed,
                                           uint64_t counter, Context& ctx) {
  MPT_PROFILE_RANGE("crossentropy_sampled_forward_backward");
  MPT_CHECK(N >= 0 && V > 0 && Vp >= V, "[crossentropy_sampled] bad size: " + dims(N, V, Vp));
  if (N == 0) return;
  MPT_CHECK(losses && dlogits && sampled && logits && dloss,
            "[crossentropy_sampled] null pointer (every buffer is required): " + dims(N, V, Vp));
  constexpr int P = kPack<T>;
  const bool vec = Vp % P == 0 && aligned16(logits) && aligned16(dlogits);
  const int W = vec ? P : 1;
  const size_t smem = sample_smem_bytes(V, W);
  // 48 KiB per block without an opt-in, static shared memory (< 1 KiB) included: V up to
  // ~180k columns unpacked, ~1.4M packed.
  MPT_CHECK(smem <= 47 * 1024,
            "[crossentropy_sampled] vocabulary too large for the sampler's shared memory (" +
                std::to_string(smem) + " bytes > 47 KiB): " + dims(N, V, Vp));
  if (vec)
    crossentropy_kernel<T, P, true><<<N, kThreads, smem, ctx.stream()>>>(
        losses, dlogits, logits, nullptr, dloss, V, Vp, sampled, seed, counter);
  else
    crossentropy_kernel<T, 1, true><<<N, kThreads, smem, ctx.stream()>>>(
        losses, dlogits, logits, nullptr, dloss, V, Vp, sampled, seed, counter);
  MPT_CUDA_CHECK_LAUNCH("crossentropy_sampled_kernel");
}

#define MPT_INSTANTIATE(T)                                                                                   \
  template void crossentropy_forward_backward<T>(float*, T*, const T*, const int*, const float*, int, int,   \
                                                 int, Context&);                                             \
  template void crossentropy_sampled_forward_backward<T>(float*, T*, int*, const T*, const float*, int, int, \
                                                         int, uint64_t, uint64_t, Context&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE)

}  // namespace mptrain::cuda
