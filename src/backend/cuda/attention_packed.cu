// The naive attention over packed sequences behind attention_packed.h. Every [rows, NH, Tn] tensor
// (scores, P, dP, dS) is indexed (query row, head, key position j in the row's sequence), so a
// sequence of L rows uses j < L of its Tn slots and the whole batch fits where ⌈rows / Tn⌉ padded
// sequences would. Five kernels, each one thread per output element (or one warp per softmax
// row), the sequence of a row found by a binary search over cu_seqlens:
//   dots      s[r,h,j] = a[r,h,·]·m[first + j,h,·]       (scores = Q·Kᵀ; backward dP = dY·Vᵀ)
//   softmax   P = softmax(scale·s) over j < L           (backward: dS from P and dP)
//   mix       o[r,h,·] = Σ_j w[r,h,j]·m[first + j,h,·]   (out = P·V; backward dQ = dS·K)
//   dK, dV    for key row first + t: Σ_i dS[first + i,h,t]·Q[first + i,h,·] and Σ_i P·dY likewise
// Sums run in a fixed order with no atomics, so repeated runs are bit-identical.
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "backend/cuda/attention_packed.h"
#include "backend/cuda/check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

constexpr int kThreads = 256;     // element kernels: a warp multiple, grid-stride over the elements
constexpr int kRowThreads = 256;  // softmax kernels: 8 warps, one (row, head) per warp at a time
constexpr int kRowWarps = kRowThreads / 32;
constexpr size_t kRegionAlign = 256;

// One call's sizes as the kernels index them.
struct Dims {
  int B, Tn, NH, HS;
  size_t rows;
  __host__ __device__ size_t C() const { return static_cast<size_t>(NH) * HS; }
  __host__ __device__ size_t pairs() const { return rows * NH; }  // (row, head) softmax rows
};

// The sequence holding row r: its first row and its length.
struct Seq {
  size_t first;
  int len;
};

// An operand as the product reads it: as stored, or rounded to TF32 (the CPU's TF32 GEMMs' operands).
template <class T>
__device__ __forceinline__ float operand(T x, bool tf32) {
  const float f = to_f32(x);
  return tf32 ? round_to_tf32(f) : f;
}

__device__ __forceinline__ Seq sequence_of(const int* cu_seqlens, int B, size_t r) {
  const int b = packed_sequence_of(cu_seqlens, B, r);
  const int first = cu_seqlens[b];
  return {static_cast<size_t>(first), cu_seqlens[b + 1] - first};
}

// s[r,h,j] (=) Σ_d a[r, h·HS + d] · m[(first + j)·3C + h·HS + d] in fp32, d ascending, for the keys
// j < L of r's sequence; 0 for j in [L, Tn). a has rows of a_stride elements (q inside qkv, or dY);
// m points at k or v inside qkv.
template <class T>
__global__ void packed_dots_kernel(float* s, const T* a, size_t a_stride, const T* m, const int* cu_seqlens,
                                   Dims d, bool tf32) {
  const size_t n = d.pairs() * d.Tn, rs = 3 * d.C();
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int j = static_cast<int>(i % d.Tn), h = static_cast<int>((i / d.Tn) % d.NH);
    const size_t r = i / (static_cast<size_t>(d.Tn) * d.NH);
    const Seq seq = sequence_of(cu_seqlens, d.B, r);
    float acc = 0.0f;
    if (j < seq.len) {
      const T* x = a + r * a_stride + static_cast<size_t>(h) * d.HS;
      const T* y = m + (seq.first + j) * rs + static_cast<size_t>(h) * d.HS;
      for (int k = 0; k < d.HS; ++k) acc += operand(x[k], tf32) * operand(y[k], tf32);
    }
    s[i] = acc;
  }
}

// P (=) softmax of scale·(s - max) over the keys j < L of each (row, head), fp32, rounded once to
// T; exactly 0 for j in [L, Tn). attention.cu's softmax_rows_kernel with L keys: the loops are
// warp-uniform (pair is the same on every lane), so the full-mask shuffles are safe.
template <class T>
__global__ void packed_softmax_kernel(T* probs, const float* scores, const int* cu_seqlens, Dims d,
                                      float scale) {
  const int lane = threadIdx.x & 31;
  const size_t step = static_cast<size_t>(gridDim.x) * kRowWarps;
  for (size_t pair = static_cast<size_t>(blockIdx.x) * kRowWarps + (threadIdx.x >> 5); pair < d.pairs();
       pair += step) {
    const int L = sequence_of(cu_seqlens, d.B, pair / d.NH).len;
    const float* s = scores + pair * d.Tn;
    T* p = probs + pair * d.Tn;
    float mx = -INFINITY;
    for (int j = lane; j < L; j += 32) mx = fmaxf(mx, s[j]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j < L; j += 32) sum += expf((s[j] - mx) * scale);
    sum = warp_sum(sum);
    const float inv = 1.0f / sum;
    for (int j = lane; j < d.Tn; j += 32) p[j] = from_f32<T>(j < L ? expf((s[j] - mx) * scale) * inv : 0.0f);
  }
}

// dS (=) scale·P·(dP - Σ_k P·dP) over the keys j < L (fp32, the CPU's order of the factors),
// rounded to T; 0 for j in [L, Tn). One warp per (row, head).
template <class T>
__global__ void packed_softmax_backward_kernel(T* ds, const float* dp, const T* probs, const int* cu_seqlens,
                                               Dims d, float scale) {
  const int lane = threadIdx.x & 31;
  const size_t step = static_cast<size_t>(gridDim.x) * kRowWarps;
  for (size_t pair = static_cast<size_t>(blockIdx.x) * kRowWarps + (threadIdx.x >> 5); pair < d.pairs();
       pair += step) {
    const int L = sequence_of(cu_seqlens, d.B, pair / d.NH).len;
    const float* g = dp + pair * d.Tn;
    const T* p = probs + pair * d.Tn;
    T* out = ds + pair * d.Tn;
    float dot = 0.0f;
    for (int j = lane; j < L; j += 32) dot += to_f32(p[j]) * g[j];
    dot = warp_sum(dot);
    for (int j = lane; j < d.Tn; j += 32)
      out[j] = from_f32<T>(j < L ? scale * to_f32(p[j]) * (g[j] - dot) : 0.0f);
  }
}

// o[r·o_stride + c] (=) Σ_{j<L} w[r,h,j] · m[(first + j)·3C + c] in fp32, j ascending, rounded to T,
// for every column c = h·HS + ·: out = P·V (w = P, m = v) and dQ = dS·K (w = dS, m = k).
template <class T>
__global__ void packed_mix_kernel(T* o, size_t o_stride, const T* w, const T* m, const int* cu_seqlens,
                                  Dims d, bool tf32) {
  const size_t C = d.C(), n = d.rows * C, rs = 3 * C;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / C, c = i % C;
    const size_t h = c / d.HS;
    const Seq seq = sequence_of(cu_seqlens, d.B, r);
    const T* wr = w + (r * d.NH + h) * d.Tn;
    float acc = 0.0f;
    for (int j = 0; j < seq.len; ++j) acc += operand(wr[j], tf32) * operand(m[(seq.first + j) * rs + c], tf32);
    o[r * o_stride + c] = from_f32<T>(acc);
  }
}

// The key side of the backward, for key row r = first + t and column c = h·HS + ·:
// dK[r, c] (=) Σ_{i<L} dS[first + i, h, t] · Q[first + i, c] and dV[r, c] (=) Σ_{i<L} P[first + i,
// h, t] · dY[first + i, c], fp32, i ascending, rounded to T, into dqkv's k and v thirds.
template <class T>
__global__ void packed_dkdv_kernel(T* dqkv, const T* ds, const T* probs, const T* qkv, const T* dout,
                                   const int* cu_seqlens, Dims d, bool tf32_scores, bool tf32_values) {
  const size_t C = d.C(), n = d.rows * C, rs = 3 * C;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / C, c = i % C;
    const size_t h = c / d.HS;
    const Seq seq = sequence_of(cu_seqlens, d.B, r);
    const size_t t = r - seq.first;
    float dk = 0.0f, dv = 0.0f;
    for (int q = 0; q < seq.len; ++q) {
      const size_t row = seq.first + q;
      const size_t at = (row * d.NH + h) * d.Tn + t;
      dk += operand(ds[at], tf32_scores) * operand(qkv[row * rs + c], tf32_scores);
      dv += operand(probs[at], tf32_values) * operand(dout[row * C + c], tf32_values);
    }
    dqkv[r * rs + C + c] = from_f32<T>(dk);
    dqkv[r * rs + 2 * C + c] = from_f32<T>(dv);
  }
}

// --- host side -------------------------------------------------------------------------------
size_t align_up(size_t bytes) { return (bytes + kRegionAlign - 1) / kRegionAlign * kRegionAlign; }

size_t slots(int rows, int Tn, int NH) {  // entries of a [rows, NH, Tn] tensor
  return static_cast<size_t>(rows) * NH * Tn;
}

std::string dims(int rows, int B, int Tn, int C, int NH) {
  return "rows=" + std::to_string(rows) + " B=" + std::to_string(B) + " T=" + std::to_string(Tn) +
         " C=" + std::to_string(C) + " NH=" + std::to_string(NH);
}

bool aligned_to(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

Dims checked_dims(const char* op, int rows, int B, int Tn, int C, int NH) {
  const std::string pre = std::string("[") + op + "] ";
  MPT_CHECK(B > 0 && Tn > 0 && C > 0 && NH > 0 && C % NH == 0,
            pre + "needs positive sizes and C a multiple of NH: " + dims(rows, B, Tn, C, NH));
  MPT_CHECK(rows > 0 && static_cast<int64_t>(rows) <= static_cast<int64_t>(B) * Tn,
            pre + "packed sequences hold " + std::to_string(rows) +
                " rows, not in [1, B·T]: " + dims(rows, B, Tn, C, NH));
  MPT_CHECK(static_cast<int64_t>(C) * 3 <= INT_MAX, pre + "too large: " + dims(rows, B, Tn, C, NH));
  return Dims{B, Tn, NH, C / NH, static_cast<size_t>(rows)};
}

// Tensors non-null and aligned to their element; cu_seqlens and scratch (which holds fp32 first)
// to 4 bytes.
template <class T>
void check_pointers(const char* op, std::initializer_list<const void*> tensors, const int* cu_seqlens,
                    const void* scratch) {
  const std::string pre = std::string("[") + op + "] ";
  for (const void* p : tensors) {
    MPT_CHECK(p != nullptr, pre + "null pointer");
    MPT_CHECK(aligned_to(p, sizeof(T)),
              pre + "a tensor pointer is not aligned to its " + std::to_string(sizeof(T)) + "-byte element");
  }
  MPT_CHECK(cu_seqlens != nullptr && aligned_to(cu_seqlens, sizeof(int)),
            pre + "cu_seqlens is null or not aligned to int");
  MPT_CHECK(scratch != nullptr && aligned_to(scratch, sizeof(float)),
            pre + "scratch is null or not 4-byte aligned");
}

unsigned element_grid(size_t n, Context& ctx) { return grid_for(n, kThreads, ctx.info().sm_count); }
unsigned row_grid(size_t pairs, Context& ctx) { return grid_for(pairs, kRowWarps, ctx.info().sm_count); }

// TF32 applies to fp32 storage only (16-bit operands are exact in any product's fp32 arithmetic).
template <class T>
bool tf32_of(ComputeType m) {
  return std::is_same_v<T, float> && m == ComputeType::TF32;
}

float softmax_scale(int HS) { return 1.0f / std::sqrt(static_cast<float>(HS)); }  // attention.cu's expression

}  // namespace

size_t attention_packed_saved_bytes(int rows, int Tn, int NH, StorageType t) {
  return slots(rows, Tn, NH) * storage_bytes(t);
}

size_t attention_packed_scratch_bytes(int rows, int Tn, int NH, StorageType t) {
  return align_up(slots(rows, Tn, NH) * sizeof(float)) + slots(rows, Tn, NH) * storage_bytes(t);
}

template <class T>
void attention_packed_forward(T* out, void* saved, const T* qkv, const int* cu_seqlens, void* scratch,
                              int rows, int B, int Tn, int C, int NH, AttentionMath math, Context& ctx) {
  MPT_PROFILE_RANGE("attention_packed_forward");
  const Dims d = checked_dims("attention_packed_forward", rows, B, Tn, C, NH);
  check_pointers<T>("attention_packed_forward", {out, saved, qkv}, cu_seqlens, scratch);
  float* scores = static_cast<float*>(scratch);
  T* probs = static_cast<T*>(saved);
  const size_t n = d.pairs() * d.Tn, C_ = d.C();
  cudaStream_t s = ctx.stream();
  // S = Q·Kᵀ (unscaled, fp32)
  packed_dots_kernel<T>
      <<<element_grid(n, ctx), kThreads, 0, s>>>(scores, qkv, 3 * C_, qkv + C_, cu_seqlens, d, tf32_of<T>(math.scores));
  MPT_CUDA_CHECK_LAUNCH("packed_dots_kernel");
  packed_softmax_kernel<T>
      <<<row_grid(d.pairs(), ctx), kRowThreads, 0, s>>>(probs, scores, cu_seqlens, d, softmax_scale(d.HS));
  MPT_CUDA_CHECK_LAUNCH("packed_softmax_kernel");
  // Y = P·V
  packed_mix_kernel<T>
      <<<element_grid(d.rows * C_, ctx), kThreads, 0, s>>>(out, C_, probs, qkv + 2 * C_, cu_seqlens, d,
                                                           tf32_of<T>(math.values));
  MPT_CUDA_CHECK_LAUNCH("packed_mix_kernel");
}

template <class T>
void attention_packed_backward(T* dqkv, const T* dout, const T* qkv, const void* saved, const int* cu_seqlens,
                               void* scratch, int rows, int B, int Tn, int C, int NH, AttentionMath math,
                               Context& ctx) {
  MPT_PROFILE_RANGE("attention_packed_backward");
  const Dims d = checked_dims("attention_packed_backward", rows, B, Tn, C, NH);
  check_pointers<T>("attention_packed_backward", {dqkv, dout, qkv, saved}, cu_seqlens, scratch);
  const size_t n = d.pairs() * d.Tn, C_ = d.C();
  float* dp = static_cast<float*>(scratch);
  T* ds = reinterpret_cast<T*>(static_cast<char*>(scratch) + align_up(n * sizeof(float)));
  const T* probs = static_cast<const T*>(saved);
  cudaStream_t s = ctx.stream();
  // dP = dY·Vᵀ (fp32)
  packed_dots_kernel<T><<<element_grid(n, ctx), kThreads, 0, s>>>(dp, dout, C_, qkv + 2 * C_, cu_seqlens, d,
                                                                  tf32_of<T>(math.values));
  MPT_CUDA_CHECK_LAUNCH("packed_dots_kernel");
  packed_softmax_backward_kernel<T>
      <<<row_grid(d.pairs(), ctx), kRowThreads, 0, s>>>(ds, dp, probs, cu_seqlens, d, softmax_scale(d.HS));
  MPT_CUDA_CHECK_LAUNCH("packed_softmax_backward_kernel");
  // dQ = dS·K, then dK = dSᵀ·Q and dV = Pᵀ·dY
  packed_mix_kernel<T>
      <<<element_grid(d.rows * C_, ctx), kThreads, 0, s>>>(dqkv, 3 * C_, ds, qkv + C_, cu_seqlens, d,
                                                           tf32_of<T>(math.scores));
  MPT_CUDA_CHECK_LAUNCH("packed_mix_kernel");
  packed_dkdv_kernel<T>
      <<<element_grid(d.rows * C_, ctx), kThreads, 0, s>>>(dqkv, ds, probs, qkv, dout, cu_seqlens, d,
                                                           tf32_of<T>(math.scores), tf32_of<T>(math.values));
  MPT_CUDA_CHECK_LAUNCH("packed_dkdv_kernel");
}

#define MPT_INSTANTIATE(T)                                                                                   \
  template void attention_packed_forward<T>(T*, void*, const T*, const int*, void*, int, int, int, int, int, \
                                            AttentionMath, Context&);                                        \
  template void attention_packed_backward<T>(T*, const T*, const T*, const void*, const int*, void*, int,    \
                                             int, int, int, int, AttentionMath, Context&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE)

}  // namespace mptrain::cuda
