// The naive GPU attention behind attention.h: q, k, v (and dY) are copied head-major into
// scratch ([B,NH,T,HS], so that every (b, h) is one matrix of a strided batch), the four
// products are strided batched cuBLASLt GEMMs over B·NH matrices, and two warp-per-row kernels
// do the fp32 softmax and its backward. Arithmetic is cpu::attention_forward_typed's step for
// step: unscaled fp32 scores, softmax of scale·(s - max) in fp32, P rounded to T once,
// dS = scale·P·(dP - Σ P·dP) in fp32 rounded to T once. The full T×T products are computed
// even for the causal form (the upper triangle of P and dS is exactly 0, so the values are
// right; skipping it is a later optimisation). No atomics: every output element has one writer
// and the warp reductions have a fixed order, so repeated runs are bit-identical.
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "backend/cuda/attention.h"
#include "backend/cuda/check.h"
#include "backend/cuda/dispatch.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

constexpr int kRowThreads = 256;  // softmax kernels: 8 warps per block, one row per warp at a time
constexpr int kRowWarps = kRowThreads / 32;
constexpr int kMoveThreads = 256;
constexpr size_t kRegionAlign = 256;  // every scratch region starts on a cuBLASLt-friendly boundary

// Byte offsets of the scratch regions. Forward uses q, k, v, heads (y) and f32 (scores);
// backward uses all (heads holds dY, f32 holds dP).
struct ScratchLayout {
  size_t q = 0, k = 0, v = 0, heads = 0, f32 = 0, ds = 0, dq = 0, dk = 0, dv = 0, total = 0;
};

ScratchLayout scratch_layout(int B, int T, int C, int NH, size_t elem) {
  const size_t btc = static_cast<size_t>(B) * T * C * elem;
  const size_t tt = static_cast<size_t>(B) * NH * T * T;
  ScratchLayout l;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t start = at;
    at += (bytes + kRegionAlign - 1) / kRegionAlign * kRegionAlign;
    return start;
  };
  l.q = take(btc), l.k = take(btc), l.v = take(btc), l.heads = take(btc);
  l.f32 = take(tt * sizeof(float));
  l.ds = take(tt * elem);
  l.dq = take(btc), l.dk = take(btc), l.dv = take(btc);
  l.total = at;
  return l;
}

std::string dims(int B, int T, int C, int NH) {
  return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
         " NH=" + std::to_string(NH);
}

void check_sizes(const char* op, int B, int T, int C, int NH) {
  const std::string pre = std::string("[") + op + "] ";
  MPT_CHECK(B > 0 && T > 0 && C > 0 && NH > 0, pre + "sizes must be positive: " + dims(B, T, C, NH));
  MPT_CHECK(C % NH == 0, pre + "C must be a multiple of NH (C % NH = " + std::to_string(C % NH) +
                             "): " + dims(B, T, C, NH));
  // The batch count of the products is an int; 3C and T·T index rows in int64.
  MPT_CHECK(static_cast<int64_t>(B) * NH <= INT_MAX && static_cast<int64_t>(C) * 3 <= INT_MAX,
            pre + "too large: " + dims(B, T, C, NH));
}

bool aligned_to(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// Pointers: non-null, aligned to their element (scratch to 16 bytes: cudaMalloc gives 256).
template <class T>
void check_pointers(const char* op, std::initializer_list<const void*> tensors, const void* scratch, int B,
                    int Tn, int C, int NH) {
  const std::string pre = std::string("[") + op + "] ";
  for (const void* p : tensors) {
    MPT_CHECK(p != nullptr, pre + "null pointer: " + dims(B, Tn, C, NH));
    MPT_CHECK(aligned_to(p, sizeof(T)),
              pre + "a tensor pointer is not aligned to its " + std::to_string(sizeof(T)) + "-byte element");
  }
  MPT_CHECK(scratch != nullptr, pre + "null scratch: " + dims(B, Tn, C, NH));
  MPT_CHECK(aligned_to(scratch, 16), pre + "scratch must be 16-byte aligned");
}

// --- head-major copies --------------------------------------------------------------------
// rows[B,T,parts·C] (row-major, parts 3 for qkv, 1 for out/dout) against `parts` head-major
// tensors heads[s][B,NH,T,HS]. U is one element of T or a 16-byte Pack<T> (then HSu = HS /
// kPack<T>). The row-major index i is rows' own index, so reads (to_heads) or writes
// (from_heads) of rows are fully coalesced; each head row is HSu contiguous units.
template <class U>
struct Heads {
  U* p[3];
};

__device__ __forceinline__ size_t head_index(size_t i, int parts, int T, int NH, int HSu, int* part) {
  const size_t d = i % HSu;
  size_t r = i / HSu;
  const size_t h = r % NH;
  r /= NH;
  *part = static_cast<int>(r % parts);
  r /= parts;
  const size_t t = r % T, b = r / T;
  return ((b * NH + h) * T + t) * HSu + d;
}

template <class U>
__global__ void to_heads_kernel(Heads<U> heads, const U* rows, int parts, int T, int NH, int HSu, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    int s = 0;
    const size_t j = head_index(i, parts, T, NH, HSu, &s);
    heads.p[s][j] = rows[i];
  }
}

template <class U>
__global__ void from_heads_kernel(U* rows, Heads<U> heads, int parts, int T, int NH, int HSu, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    int s = 0;
    const size_t j = head_index(i, parts, T, NH, HSu, &s);
    rows[i] = heads.p[s][j];
  }
}

// to_heads (rows → heads) or from_heads (heads → rows); 16-byte packs when HS and every
// pointer allow them.
template <class T>
void move_heads(bool to_heads, T* rows, T* h0, T* h1, T* h2, int parts, int B, int Tn, int C, int NH,
                Context& ctx) {
  const int HS = C / NH;
  bool vec = HS % kPack<T> == 0 && aligned16(rows);
  for (const T* h : {h0, h1, h2}) vec = vec && (h == nullptr || aligned16(h));
  const int width = vec ? kPack<T> : 1;
  const int HSu = HS / width;
  const size_t n = static_cast<size_t>(B) * Tn * parts * C / width;
  const unsigned grid = grid_for(n, kMoveThreads, ctx.info().sm_count);
  if (vec) {
    using U = Pack<T>;
    Heads<U> hp{{reinterpret_cast<U*>(h0), reinterpret_cast<U*>(h1), reinterpret_cast<U*>(h2)}};
    if (to_heads) {
      to_heads_kernel<U><<<grid, kMoveThreads, 0, ctx.stream()>>>(hp, reinterpret_cast<const U*>(rows), parts,
                                                                  Tn, NH, HSu, n);
      MPT_CUDA_CHECK_LAUNCH("to_heads_kernel");
    } else {
      from_heads_kernel<U>
          <<<grid, kMoveThreads, 0, ctx.stream()>>>(reinterpret_cast<U*>(rows), hp, parts, Tn, NH, HSu, n);
      MPT_CUDA_CHECK_LAUNCH("from_heads_kernel");
    }
  } else {
    Heads<T> hp{{h0, h1, h2}};
    if (to_heads) {
      to_heads_kernel<T><<<grid, kMoveThreads, 0, ctx.stream()>>>(hp, rows, parts, Tn, NH, HSu, n);
      MPT_CUDA_CHECK_LAUNCH("to_heads_kernel");
    } else {
      from_heads_kernel<T><<<grid, kMoveThreads, 0, ctx.stream()>>>(rows, hp, parts, Tn, NH, HSu, n);
      MPT_CUDA_CHECK_LAUNCH("from_heads_kernel");
    }
  }
}

// --- softmax and its backward, one warp per row -----------------------------------------------
// Rows are the B·NH·T query rows of [B,NH,T,T]; row r is query t = r % T of sequence
// b = r / (NH·T). Causal: keys [0, t] (t + 1 of them), P exactly 0 above the diagonal.
// Masked: keys with key_mask[b, j] != 0 (all when key_mask is null); P exactly 0 on the others.
// The loops are warp-uniform (r is the same on every lane), so the full-mask shuffles are safe.
template <class T, bool kCausal>
__global__ void softmax_rows_kernel(T* probs, const float* scores, const int* key_mask, size_t rows, int Tn,
                                    int NH, float scale) {
  const int lane = threadIdx.x & 31;
  const size_t step = static_cast<size_t>(gridDim.x) * kRowWarps;
  for (size_t r = static_cast<size_t>(blockIdx.x) * kRowWarps + (threadIdx.x >> 5); r < rows; r += step) {
    const int t = static_cast<int>(r % Tn);
    const float* s = scores + r * Tn;
    T* p = probs + r * Tn;
    const int* m = nullptr;
    if (!kCausal && key_mask) m = key_mask + (r / (static_cast<size_t>(NH) * Tn)) * Tn;
    const int n = kCausal ? t + 1 : Tn;
    float mx = -INFINITY;
    for (int j = lane; j < n; j += 32)
      if (!m || m[j]) mx = fmaxf(mx, s[j]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j < n; j += 32)
      if (!m || m[j]) sum += expf((s[j] - mx) * scale);
    sum = warp_sum(sum);
    const float inv = 1.0f / sum;
    for (int j = lane; j < Tn; j += 32) {
      float e = 0.0f;
      if (j < n && (!m || m[j])) e = expf((s[j] - mx) * scale);
      // Causal: exactly 0 above the diagonal. Masked: 0·inv, as the CPU, which is 0 for a row
      // with a real key and NaN for an all-padding row (sum 0), the documented NaN output.
      p[j] = from_f32<T>(kCausal && j >= n ? 0.0f : e * inv);
    }
  }
}

// dS[r, j] = scale·P·(dP - Σ_k P·dP) over the keys row r attends to (fp32, cpu's order of the
// factors), 0 above the diagonal (causal); on padded keys P is 0, so dS is 0 there too.
template <class T, bool kCausal>
__global__ void softmax_backward_rows_kernel(T* ds, const float* dp, const T* probs, size_t rows, int Tn,
                                             float scale) {
  const int lane = threadIdx.x & 31;
  const size_t step = static_cast<size_t>(gridDim.x) * kRowWarps;
  for (size_t r = static_cast<size_t>(blockIdx.x) * kRowWarps + (threadIdx.x >> 5); r < rows; r += step) {
    const int t = static_cast<int>(r % Tn);
    const int n = kCausal ? t + 1 : Tn;
    const float* d = dp + r * Tn;
    const T* p = probs + r * Tn;
    T* out = ds + r * Tn;
    float dot = 0.0f;
    for (int j = lane; j < n; j += 32) dot += to_f32(p[j]) * d[j];
    dot = warp_sum(dot);
    for (int j = lane; j < Tn; j += 32)
      out[j] = from_f32<T>(j < n ? scale * to_f32(p[j]) * (d[j] - dot) : 0.0f);
  }
}

unsigned row_grid(size_t rows, Context& ctx) { return grid_for(rows, kRowWarps, ctx.info().sm_count); }

template <class T>
T* region(void* scratch, size_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(scratch) + offset);
}

template <class T>
void forward_impl(T* out, T* probs, const T* qkv, const int* key_mask, bool causal, void* scratch, int B,
                  int Tn, int C, int NH, AttentionMath math, Context& ctx) {
  const ScratchLayout l = scratch_layout(B, Tn, C, NH, sizeof(T));
  T *q = region<T>(scratch, l.q), *k = region<T>(scratch, l.k), *v = region<T>(scratch, l.v);
  T* y = region<T>(scratch, l.heads);
  float* scores = region<float>(scratch, l.f32);
  const int HS = C / NH, BH = B * NH;
  const int64_t tt = static_cast<int64_t>(Tn) * Tn, th = static_cast<int64_t>(Tn) * HS;
  constexpr StorageType st = storage_of<T>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));  // the CPU's expression

  move_heads<T>(true, const_cast<T*>(qkv), q, k, v, 3, B, Tn, C, NH, ctx);  // read only
  // S = Q·K^T (unscaled, fp32)
  gemm_batched(scores, StorageType::F32, q, k, st, Tn, Tn, HS, false, true, false, math.scores,
               {BH, th, th, tt}, ctx);
  const size_t rows = static_cast<size_t>(BH) * Tn;
  if (causal) {
    softmax_rows_kernel<T, true>
        <<<row_grid(rows, ctx), kRowThreads, 0, ctx.stream()>>>(probs, scores, nullptr, rows, Tn, NH, scale);
  } else {
    softmax_rows_kernel<T, false>
        <<<row_grid(rows, ctx), kRowThreads, 0, ctx.stream()>>>(probs, scores, key_mask, rows, Tn, NH, scale);
  }
  MPT_CUDA_CHECK_LAUNCH("softmax_rows_kernel");
  // Y = P·V
  gemm_batched(y, st, probs, v, st, Tn, HS, Tn, false, false, false, math.values, {BH, tt, th, th}, ctx);
  move_heads<T>(false, out, y, nullptr, nullptr, 1, B, Tn, C, NH, ctx);
}

template <class T>
void backward_impl(T* dqkv, const T* dout, const T* qkv, const T* probs, bool causal, void* scratch, int B,
                   int Tn, int C, int NH, AttentionMath math, Context& ctx) {
  const ScratchLayout l = scratch_layout(B, Tn, C, NH, sizeof(T));
  T *q = region<T>(scratch, l.q), *k = region<T>(scratch, l.k), *v = region<T>(scratch, l.v);
  T* dy = region<T>(scratch, l.heads);
  float* dp = region<float>(scratch, l.f32);
  T* ds = region<T>(scratch, l.ds);
  T *dq = region<T>(scratch, l.dq), *dk = region<T>(scratch, l.dk), *dv = region<T>(scratch, l.dv);
  const int HS = C / NH, BH = B * NH;
  const int64_t tt = static_cast<int64_t>(Tn) * Tn, th = static_cast<int64_t>(Tn) * HS;
  constexpr StorageType st = storage_of<T>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));

  move_heads<T>(true, const_cast<T*>(qkv), q, k, v, 3, B, Tn, C, NH, ctx);  // read only
  move_heads<T>(true, const_cast<T*>(dout), dy, nullptr, nullptr, 1, B, Tn, C, NH, ctx);
  // dP = dY·V^T (fp32)
  gemm_batched(dp, StorageType::F32, dy, v, st, Tn, Tn, HS, false, true, false, math.values, {BH, th, th, tt},
               ctx);
  const size_t rows = static_cast<size_t>(BH) * Tn;
  if (causal) {
    softmax_backward_rows_kernel<T, true>
        <<<row_grid(rows, ctx), kRowThreads, 0, ctx.stream()>>>(ds, dp, probs, rows, Tn, scale);
  } else {
    softmax_backward_rows_kernel<T, false>
        <<<row_grid(rows, ctx), kRowThreads, 0, ctx.stream()>>>(ds, dp, probs, rows, Tn, scale);
  }
  MPT_CUDA_CHECK_LAUNCH("softmax_backward_rows_kernel");
  // dQ = dS·K, dK = dS^T·Q, dV = P^T·dY
  gemm_batched(dq, st, ds, k, st, Tn, HS, Tn, false, false, false, math.scores, {BH, tt, th, th}, ctx);
  gemm_batched(dk, st, ds, q, st, Tn, HS, Tn, true, false, false, math.scores, {BH, tt, th, th}, ctx);
  gemm_batched(dv, st, probs, dy, st, Tn, HS, Tn, true, false, false, math.values, {BH, tt, th, th}, ctx);
  move_heads<T>(false, dqkv, dq, dk, dv, 3, B, Tn, C, NH, ctx);
}

// --- packed sequences (AttentionKeys::packed) -----------------------------------------------
// Sequences of different lengths are no strided batch of equal GEMMs, so the packed form is
// plain kernels, one fp32 dot product per thread (the fast path is flash_attention.h's packed
// form). Every [rows, NH, Tn] tensor (scores, P, dP, dS) is indexed (query row, head, key
// position j in the row's sequence), so a sequence of L rows uses j < L of its Tn slots and the
// whole batch fits where ⌈rows / Tn⌉ padded sequences would. Five kernels, each one thread per output element (or one warp per softmax
// row), the sequence of a row found by a binary search over cu_seqlens:
//   dots      s[r,h,j] = a[r,h,·]·m[first + j,h,·]       (scores = Q·Kᵀ; backward dP = dY·Vᵀ)
//   softmax   P = softmax(scale·s) over j < L           (backward: dS from P and dP)
//   mix       o[r,h,·] = Σ_j w[r,h,j]·m[first + j,h,·]   (out = P·V; backward dQ = dS·K)
//   dK, dV    for key row first + t: Σ_i dS[first + i,h,t]·Q[first + i,h,·] and Σ_i P·dY likewise
// Sums run in a fixed order with no atomics, so repeated runs are bit-identical.

constexpr int kThreads = 256;  // packed element kernels: a warp multiple, grid-stride over the elements

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
    for (int j = 0; j < seq.len; ++j)
      acc += operand(wr[j], tf32) * operand(m[(seq.first + j) * rs + c], tf32);
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

// TF32 applies to fp32 storage only (16-bit operands are exact in any product's fp32 arithmetic).
template <class T>
bool tf32_of(ComputeType m) {
  return std::is_same_v<T, float> && m == ComputeType::TF32;
}

float softmax_scale(int HS) { return 1.0f / std::sqrt(static_cast<float>(HS)); }  // forward_impl's expression

template <class T>
void packed_forward(T* out, void* saved, const T* qkv, const int* cu_seqlens, void* scratch, int rows, int B,
                    int Tn, int C, int NH, AttentionMath math, Context& ctx) {
  MPT_PROFILE_RANGE("attention_packed_forward");
  const Dims d = checked_dims("attention_packed_forward", rows, B, Tn, C, NH);
  check_pointers<T>("attention_packed_forward", {out, saved, qkv}, cu_seqlens, scratch);
  float* scores = static_cast<float*>(scratch);
  T* probs = static_cast<T*>(saved);
  const size_t n = d.pairs() * d.Tn, C_ = d.C();
  cudaStream_t s = ctx.stream();
  // S = Q·Kᵀ (unscaled, fp32)
  packed_dots_kernel<T><<<element_grid(n, ctx), kThreads, 0, s>>>(scores, qkv, 3 * C_, qkv + C_, cu_seqlens,
                                                                  d, tf32_of<T>(math.scores));
  MPT_CUDA_CHECK_LAUNCH("packed_dots_kernel");
  packed_softmax_kernel<T>
      <<<row_grid(d.pairs(), ctx), kRowThreads, 0, s>>>(probs, scores, cu_seqlens, d, softmax_scale(d.HS));
  MPT_CUDA_CHECK_LAUNCH("packed_softmax_kernel");
  // Y = P·V
  packed_mix_kernel<T><<<element_grid(d.rows * C_, ctx), kThreads, 0, s>>>(
      out, C_, probs, qkv + 2 * C_, cu_seqlens, d, tf32_of<T>(math.values));
  MPT_CUDA_CHECK_LAUNCH("packed_mix_kernel");
}

template <class T>
void packed_backward(T* dqkv, const T* dout, const T* qkv, const void* saved, const int* cu_seqlens,
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
  packed_mix_kernel<T><<<element_grid(d.rows * C_, ctx), kThreads, 0, s>>>(
      dqkv, 3 * C_, ds, qkv + C_, cu_seqlens, d, tf32_of<T>(math.scores));
  MPT_CUDA_CHECK_LAUNCH("packed_mix_kernel");
  packed_dkdv_kernel<T><<<element_grid(d.rows * C_, ctx), kThreads, 0, s>>>(
      dqkv, ds, probs, qkv, dout, cu_seqlens, d, tf32_of<T>(math.scores), tf32_of<T>(math.values));
  MPT_CUDA_CHECK_LAUNCH("packed_dkdv_kernel");
}

}  // namespace

size_t attention_saved_bytes(int B, int T, int C, int NH, StorageType t) {
  check_sizes("attention_saved_bytes", B, T, C, NH);
  return static_cast<size_t>(B) * NH * T * T * storage_bytes(t);
}

size_t attention_scratch_bytes(int B, int T, int C, int NH, StorageType t) {
  check_sizes("attention_scratch_bytes", B, T, C, NH);
  return scratch_layout(B, T, C, NH, storage_bytes(t)).total;
}

size_t attention_packed_saved_bytes(int rows, int Tn, int NH, StorageType t) {
  return slots(rows, Tn, NH) * storage_bytes(t);
}

size_t attention_packed_scratch_bytes(int rows, int Tn, int NH, StorageType t) {
  return align_up(slots(rows, Tn, NH) * sizeof(float)) + slots(rows, Tn, NH) * storage_bytes(t);
}

// Causal and masked are one strided batch; the packed form has kernels of its own.
template <class T>
void attention_forward(T* out, void* saved, const T* qkv, const AttentionKeys& keys, void* scratch, int B,
                       int Tn, int C, int NH, AttentionMath math, Context& ctx) {
  if (keys.form == AttentionKeys::Form::Packed)
    return packed_forward<T>(out, saved, qkv, keys.cu_seqlens, scratch, keys.rows, B, Tn, C, NH, math, ctx);
  MPT_PROFILE_RANGE("attention_forward");
  check_sizes("attention_forward", B, Tn, C, NH);
  check_pointers<T>("attention_forward", {out, saved, qkv}, scratch, B, Tn, C, NH);
  MPT_CHECK(keys.key_mask == nullptr || aligned_to(keys.key_mask, sizeof(int)),
            "[attention_forward] key_mask is not aligned to int");
  const bool causal = keys.form == AttentionKeys::Form::Causal;
  forward_impl<T>(out, static_cast<T*>(saved), qkv, causal ? nullptr : keys.key_mask, causal, scratch, B, Tn,
                  C, NH, math, ctx);
}

template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const void* saved, const AttentionKeys& keys,
                        void* scratch, int B, int Tn, int C, int NH, AttentionMath math, Context& ctx) {
  if (keys.form == AttentionKeys::Form::Packed)
    return packed_backward<T>(dqkv, dout, qkv, saved, keys.cu_seqlens, scratch, keys.rows, B, Tn, C, NH, math,
                              ctx);
  MPT_PROFILE_RANGE("attention_backward");
  check_sizes("attention_backward", B, Tn, C, NH);
  check_pointers<T>("attention_backward", {dqkv, dout, qkv, saved}, scratch, B, Tn, C, NH);
  backward_impl<T>(dqkv, dout, qkv, static_cast<const T*>(saved), keys.form == AttentionKeys::Form::Causal,
                   scratch, B, Tn, C, NH, math, ctx);
}

#define MPT_INSTANTIATE(T)                                                                                   \
  template void attention_forward<T>(T*, void*, const T*, const AttentionKeys&, void*, int, int, int, int,   \
                                     AttentionMath, Context&);                                               \
  template void attention_backward<T>(T*, const T*, const T*, const void*, const AttentionKeys&, void*, int, \
                                      int, int, int, AttentionMath, Context&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE)

}  // namespace mptrain::cuda
