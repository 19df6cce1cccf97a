// The fused attention behind flash_attention.h: tensor-core tiles (mma.sync m16n8k16, 16-bit
// operands, fp32 accumulators) over shared-memory tiles of q, k, v read straight from qkv.
//
// Every kernel runs 4 warps (128 threads); a warp owns 16 rows of its block's 64-row tile and
// keeps that tile's accumulators in registers. Shared-memory rows are padded by 16 bytes
// (HS + 8 elements), which makes every fragment load below free of bank conflicts.
//   forward   block = (b·h, 64 queries); loop over 64-key tiles (causal: up to the diagonal);
//             S = Q·Kᵀ, online softmax in fp32 (row max and sum in registers, a quad of lanes
//             per row), P rounded to T straight from the S accumulators into the A operand of
//             P·V; out = O / l and lse = scale·m + ln(l) at the end.
//   D         one warp per (token, head): D = Σ dO ⊙ O in fp32.
//   dK, dV    block = (b·h, 64 keys); loop over query tiles (64 queries for HS 64, 32 for HS 128,
//             to stay within the register file; causal: from the diagonal on); recompute
//             Sᵀ = K·Qᵀ, Pᵀ = exp(scale·Sᵀ − lse), dV += Pᵀ·dO, dPᵀ = V·dOᵀ,
//             dSᵀ = scale·Pᵀ ⊙ (dPᵀ − D), dK += dSᵀ·Q.
//   dQ        block = (b·h, 64 queries); loop over key tiles: recompute S, P, dP, dS and
//             accumulate dQ = dS·K. Two passes instead of FlashAttention-2's atomic dQ: every
//             output element has one writer and a fixed summation order, so repeated runs are
//             bit-identical (the backend's no-float-atomics rule).
// Masking: a key is valid when key < L (the sequence's length: T, or a packed sequence's own) and
// key_mask (if any) is nonzero; causal adds key ≤ query. Invalid scores are −inf before the
// softmax (forward) and P is exactly 0 for them (backward), so padded keys get exactly 0 dK and
// dV. Rows and keys past L are zero-filled in shared memory (never read) and never stored.
// Packed sequences (cu_seqlens) keep the grid of the B·T layout, tiles counted from T: a block
// whose tile starts at or past its sequence's end exits at once; the others offset their rows by
// the sequence's first row instead of b·T, and lse and D are kept per row (struct Seq).
// Causal tiles entirely above the diagonal are skipped by the loop bounds; key tiles with no
// valid key (padding) by a block vote. Every kernel double-buffers the tiles it loops over with
// cp.async; fragments come through ldmatrix (switches kCpAsync, kLdmatrix).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/dispatch.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 64;  // query rows per forward / dQ block, keys per tile and per dK/dV block
constexpr int kRowsPerWarp = 16;
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kDotThreads = 256;  // D kernel: 8 warps, one (token, head) row per warp at a time
static_assert(kTile == kWarps * kRowsPerWarp, "each warp owns 16 rows of a 64-row tile");

// Which keys a query sees (attention.h), a template argument of every kernel, so that each form
// compiles to its own code: the causal diagonal, a padded batch's key mask (or none), packed
// sequences' own rows.
using Keys = AttentionKeys::Form;

// Query rows per tile of the dK/dV kernel: its accumulators (dK and dV, 16 × HS each per warp)
// plus Sᵀ and dPᵀ (16 × BQ each) must fit in registers.
template <int HS>
constexpr int bwd_query_tile() {
  return HS <= 64 ? 64 : 32;
}

// --- tensor-core helpers -----------------------------------------------------------------
// Fragment layouts of mma.m16n8k16 (PTX ISA), lane = 4·g + c (g = lane/4, c = lane%4):
//   A 16×16 row-major: a0 (g, 2c..2c+1), a1 (g+8, 2c..), a2 (g, 2c+8..), a3 (g+8, 2c+8..)
//   B 16×8 (k × n):    b0 (k = 2c..2c+1, n = g), b1 (k = 2c+8.., n = g)
//   C 16×8 fp32:       c0, c1 (g, 2c..2c+1), c2, c3 (g+8, 2c..2c+1)
// Two 16-bit values per 32-bit register, the lower column (or k) in the low half.
template <class T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma16816<Bf16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma16816<Fp16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two fp32 values rounded (to nearest even) to T and packed, lo in the low half.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);

template <>
__device__ __forceinline__ uint32_t pack2<Bf16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return static_cast<uint32_t>(__bfloat16_as_ushort(v.x)) |
         (static_cast<uint32_t>(__bfloat16_as_ushort(v.y)) << 16);
}

template <>
__device__ __forceinline__ uint32_t pack2<Fp16>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return static_cast<uint32_t>(__half_as_ushort(v.x)) | (static_cast<uint32_t>(__half_as_ushort(v.y)) << 16);
}

__device__ __forceinline__ uint32_t ld32(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Fragments come from shared memory through ldmatrix (one instruction loads a whole fragment; .trans
// transposes 8×8 blocks on the way) or, with kLdmatrix = false, through plain 32- and 16-bit loads
// that spell out the layouts above: the fallback to isolate a suspected ldmatrix addressing bug on
// a GPU (both compile; the tests exercise whichever is selected). ldmatrix: lanes 8i..8i+7 give the
// row addresses (16-byte aligned: LD·2 and every column offset are multiples of 16 bytes) of 8×8
// block i; register i of every lane receives block i in the A/B/C pair layout (row lane/4, columns
// 2·(lane%4), +1; .trans: column lane/4, rows 2·(lane%4), +1). The "memory" clobber keeps the
// compiler from moving these loads across the barriers that order the shared tiles.
constexpr bool kLdmatrix = true;

__device__ __forceinline__ uint32_t smem_addr(const uint16_t* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A fragment of the 16×16 block at (r0, k0) of a row-major shared tile with leading dimension LD.
template <int LD>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const uint16_t* s, int r0, int k0, int lane) {
  if constexpr (kLdmatrix) {
    // blocks: 0 (r0, k0), 1 (r0+8, k0), 2 (r0, k0+8), 3 (r0+8, k0+8) = a0..a3
    const int i = lane & 7, blk = lane >> 3;
    const uint32_t addr = smem_addr(s + (r0 + i + (blk & 1) * 8) * LD + k0 + (blk >> 1) * 8);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(addr)
                 : "memory");
  } else {
    const int g = lane >> 2, c = (lane & 3) * 2;
    const uint16_t* p = s + (r0 + g) * LD + k0 + c;
    a[0] = ld32(p);
    a[1] = ld32(p + 8 * LD);
    a[2] = ld32(p + 8);
    a[3] = ld32(p + 8 * LD + 8);
  }
}

// B fragment (k0.., n0..) of B = Mᵀ for a row-major shared M (B[k][n] = M[n][k]): each register
// is two neighbours of one row of M.
template <int LD>
__device__ __forceinline__ void load_b_t(uint32_t& b0, uint32_t& b1, const uint16_t* s, int n0, int k0,
                                         int lane) {
  if constexpr (kLdmatrix) {
    // blocks of M: 0 (n0, k0) = b0, 1 (n0, k0+8) = b1; lanes 16-31 repeat 0-15 (ignored by .x2)
    const int i = lane & 7, blk = (lane >> 3) & 1;
    const uint32_t addr = smem_addr(s + (n0 + i) * LD + k0 + blk * 8);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(b0), "=r"(b1)
                 : "r"(addr)
                 : "memory");
  } else {
    const int g = lane >> 2, c = (lane & 3) * 2;
    const uint16_t* p = s + (n0 + g) * LD + k0 + c;
    b0 = ld32(p);
    b1 = ld32(p + 8);
  }
}

// B fragment (k0.., n0..) of B = M itself (B[k][n] = M[k][n]): each register gathers two rows.
template <int LD>
__device__ __forceinline__ void load_b(uint32_t& b0, uint32_t& b1, const uint16_t* s, int k0, int n0,
                                       int lane) {
  if constexpr (kLdmatrix) {
    // blocks of M, transposed: 0 (k0, n0) = b0, 1 (k0+8, n0) = b1
    const int i = lane & 7, blk = (lane >> 3) & 1;
    const uint32_t addr = smem_addr(s + (k0 + i + blk * 8) * LD + n0);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(b0), "=r"(b1)
                 : "r"(addr)
                 : "memory");
  } else {
    const int g = lane >> 2, c = (lane & 3) * 2;
    const uint16_t* p = s + (k0 + c) * LD + n0 + g;
    b0 = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[LD]) << 16);
    b1 = static_cast<uint32_t>(p[8 * LD]) | (static_cast<uint32_t>(p[9 * LD]) << 16);
  }
}

// The A fragment of a 16×16 block of P (or dS) held as two 16×8 accumulators: the C layout of
// columns 0-7 and 8-15 is exactly the A layout of k 0-7 and 8-15.
template <class T>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack2<T>(lo[0], lo[1]);
  a[1] = pack2<T>(lo[2], lo[3]);
  a[2] = pack2<T>(hi[0], hi[1]);
  a[3] = pack2<T>(hi[2], hi[3]);
}

// --- warp products ---------------------------------------------------------------------------
// acc[N/8] (=) this warp's 16 rows (from row0) of shared tile a · Bᵀ, B rows [0, N) of shared
// tile b, over HS columns (S = Q·Kᵀ and its kin).
template <class T, int N, int HS, int LD>
__device__ __forceinline__ void mma_rows_bt(float (&acc)[N / 8][4], const uint16_t* a, int row0,
                                            const uint16_t* b, int lane) {
#pragma unroll
  for (int n = 0; n < N / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < HS / 16; ++kk) {
    uint32_t af[4];
    load_a<LD>(af, a, row0, kk * 16, lane);
#pragma unroll
    for (int n = 0; n < N / 8; ++n) {
      uint32_t b0, b1;
      load_b_t<LD>(b0, b1, b, n * 8, kk * 16, lane);
      mma16816<T>(acc[n], af, b0, b1);
    }
  }
}

// acc[HS/8] += P·M for this warp's 16 rows: P a 16 × K block held as K/8 fp32 accumulators
// (rounded to T on the way), M rows [0, K) of shared tile m (O += P·V and its kin).
template <class T, int K, int HS, int LD>
__device__ __forceinline__ void mma_acc_tile(float (&acc)[HS / 8][4], const float (&p)[K / 8][4],
                                             const uint16_t* m, int lane) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t a[4];
    acc_to_a<T>(a, p[2 * kk], p[2 * kk + 1]);
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) {
      uint32_t b0, b1;
      load_b<LD>(b0, b1, m, kk * 16, n * 8, lane);
      mma16816<T>(acc[n], a, b0, b1);
    }
  }
}

// --- shared-memory tiles ----------------------------------------------------------------------
// ROWS rows of HS elements from global rows t0.. (stride `stride` elements) into a shared tile
// (leading dimension HS + 8) with 16-byte loads; rows at or past len (the sequence's end) are
// zero-filled, never read, so products over them are finite and exactly 0 where P is 0.
template <int HS, int ROWS>
__device__ __forceinline__ void load_tile(uint16_t* dst, const uint16_t* src, size_t stride, int t0,
                                          int len) {
  constexpr int kPacks = HS / 8, LD = HS + 8;
  for (int i = threadIdx.x; i < ROWS * kPacks; i += kThreads) {
    const int r = i / kPacks, c = (i % kPacks) * 8;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (t0 + r < len) v = *reinterpret_cast<const uint4*>(src + static_cast<size_t>(t0 + r) * stride + c);
    *reinterpret_cast<uint4*>(dst + r * LD + c) = v;
  }
}

// The forward's K/V tiles are double-buffered: the next tile is requested with cp.async (16 bytes
// per thread, global → shared without registers; src-size 0 zero-fills rows past len) before the
// current one is used, so the copy overlaps the products. kCpAsync = false loads the next tile
// synchronously into the same two buffers (same barriers): the fallback to isolate a suspected
// cp.async problem on a GPU.
constexpr bool kCpAsync = true;

__device__ __forceinline__ void cp_async16(uint16_t* dst, const uint16_t* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  if constexpr (kCpAsync) asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most one committed group (the most recent) is still in flight.
__device__ __forceinline__ void cp_async_wait_all_but_one() {
  if constexpr (kCpAsync) asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

template <int HS, int ROWS>
__device__ __forceinline__ void load_tile_async(uint16_t* dst, const uint16_t* src, size_t stride, int t0,
                                                int len) {
  if constexpr (kCpAsync) {
    constexpr int kPacks = HS / 8, LD = HS + 8;
    for (int i = threadIdx.x; i < ROWS * kPacks; i += kThreads) {
      const int r = i / kPacks, c = (i % kPacks) * 8;
      const bool ok = t0 + r < len;
      // a row past len reads nothing (src-size 0) but still names a valid address: row 0
      cp_async16(dst + r * LD + c, src + static_cast<size_t>(ok ? t0 + r : 0) * stride + c, ok);
    }
  } else {
    load_tile<HS, ROWS>(dst, src, stride, t0, len);
  }
}

// Key validity for the tile at k0 into valid[0..kTile) by plain stores (threads < kTile); returns
// this thread's vote (whether its key is valid), to be combined later by __syncthreads_or. A key
// is valid below its sequence's length len where key_mask [B,T] (null: none) is nonzero.
__device__ __forceinline__ int write_key_valid(int* valid, const int* key_mask, int b, int Tn, int k0,
                                               int len) {
  int ok = 0;
  if (threadIdx.x < kTile) {
    const int key = k0 + static_cast<int>(threadIdx.x);
    ok = key < len && (key_mask == nullptr || key_mask[static_cast<size_t>(b) * Tn + key] != 0);
    valid[threadIdx.x] = ok;
  }
  return ok;
}

// A warp's 16 × HS fp32 accumulators, multiplied by the row factors f[0] (row g) and f[1]
// (row g+8), rounded to T into the warp's own 16 rows of a shared tile, then stored as 16-byte
// rows to dst rows t0.. (stride elements; rows at or past len skipped). Only this warp touches
// those shared rows, so warp barriers suffice.
template <class T, int HS>
__device__ __forceinline__ void store_rows(uint16_t* dst, size_t stride, uint16_t* tile,
                                           const float (&acc)[HS / 8][4], const float (&f)[2], int t0,
                                           int len, int warp, int lane) {
  constexpr int LD = HS + 8, kPacks = HS / 8;
  const int g = lane >> 2, c = (lane & 3) * 2;
  uint16_t* rows = tile + warp * kRowsPerWarp * LD;
  __syncwarp();  // every lane is done reading these rows as operands
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
    *reinterpret_cast<uint32_t*>(rows + g * LD + n * 8 + c) = pack2<T>(acc[n][0] * f[0], acc[n][1] * f[0]);
    *reinterpret_cast<uint32_t*>(rows + (g + 8) * LD + n * 8 + c) =
        pack2<T>(acc[n][2] * f[1], acc[n][3] * f[1]);
  }
  __syncwarp();
  for (int i = lane; i < kRowsPerWarp * kPacks; i += 32) {
    const int r = i / kPacks, col = (i % kPacks) * 8, t = t0 + warp * kRowsPerWarp + r;
    if (t < len)
      *reinterpret_cast<uint4*>(dst + static_cast<size_t>(t) * stride + col) =
          *reinterpret_cast<const uint4*>(rows + r * LD + col);
  }
}

// --- sequences -------------------------------------------------------------------------------
// Where a block's sequence b lies, for head h. The B·T layout (Causal, Masked): rows b·T.., T of
// them, lse and D [B,NH,T]. Packed (backend/backend.h's EmbeddingArgs; cu_seqlens device ints,
// trusted: the host checked them before staging): rows cu[b].., cu[b+1] − cu[b] of them, lse
// and D per row, [rows, NH], so that memory sized for ⌈rows / T⌉ sequences of T (backend.h's
// AttentionArgs) holds any packing, however many sequences it has.
struct Seq {
  size_t first;   // its first row of qkv, out, dout and dqkv
  int len;        // its rows: queries and keys at or past len do not exist
  size_t stat0;   // the lse / D entry of its row 0
  int stat_step;  // entries from one row to the next
  __device__ __forceinline__ size_t stat(int t) const { return stat0 + static_cast<size_t>(t) * stat_step; }
};

template <Keys K>
__device__ __forceinline__ Seq sequence_at(const int* cu_seqlens, int b, int h, int Tn, int NH) {
  if constexpr (K == Keys::Packed) {
    const int first = cu_seqlens[b];
    return {static_cast<size_t>(first), cu_seqlens[b + 1] - first, static_cast<size_t>(first) * NH + h, NH};
  } else {
    return {static_cast<size_t>(b) * Tn, Tn, static_cast<size_t>(b * NH + h) * Tn, 1};
  }
}

// --- forward -------------------------------------------------------------------------------
template <int HS>
constexpr size_t fwd_smem_bytes() {  // Q, two K and two V tiles, two key-validity rows
  return static_cast<size_t>(5 * kTile) * (HS + 8) * sizeof(uint16_t) + 2 * kTile * sizeof(int);
}

// grid (B·NH, query tiles of T), heaviest causal tiles first; lse in natural-log units of scale·s.
// Packed: a tile at or past its sequence's end has no rows and exits (uniformly, before any
// barrier); the tiles below it cover every row of the sequence.
template <class T, int HS, Keys K>
__global__ void __launch_bounds__(kThreads)
    flash_fwd_kernel(T* out, float* lse, const T* qkv, const int* key_mask, const int* cu_seqlens, int Tn,
                     int NH, float scale, float scale_log2) {
  constexpr int LD = HS + 8;
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem);
  uint16_t* ks_buf = qs + kTile * LD;                                 // stage st at ks_buf + st·kTile·LD
  uint16_t* vs_buf = ks_buf + 2 * kTile * LD;                         // likewise
  int* kvalid_buf = reinterpret_cast<int*>(vs_buf + 2 * kTile * LD);  // stage st at + st·kTile

  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kTile;
  constexpr bool kCausal = K == Keys::Causal;
  const int* mask = K == Keys::Packed ? nullptr : key_mask;
  const Seq seq = sequence_at<K>(cu_seqlens, b, h, Tn, NH);
  if (q0 >= seq.len) return;
  const int len = seq.len;
  const int C = NH * HS;
  const size_t rs = 3 * static_cast<size_t>(C);
  const uint16_t* base = reinterpret_cast<const uint16_t*>(qkv) + seq.first * rs + h * HS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = (lane & 3) * 2;
  const int row0 = q0 + warp * kRowsPerWarp + g;  // this lane's rows: row0 and row0 + 8
  const int kv_end = kCausal ? min(len, q0 + kTile) : len;
  const int n_tiles = (kv_end + kTile - 1) / kTile;

  // Prologue: request key tile 0 into stage 0, then load Q (synchronously) while it flies.
  load_tile_async<HS, kTile>(ks_buf, base + C, rs, 0, len);
  load_tile_async<HS, kTile>(vs_buf, base + 2 * C, rs, 0, len);
  cp_async_commit();
  int vote = write_key_valid(kvalid_buf, mask, b, Tn, 0, len);
  load_tile<HS, kTile>(qs, base, rs, q0, len);
  __syncthreads();
  uint32_t qf[HS / 16][4];
#pragma unroll
  for (int kk = 0; kk < HS / 16; ++kk) load_a<LD>(qf[kk], qs, warp * kRowsPerWarp, kk * 16, lane);

  float o[HS / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int it = 0; it < n_tiles; ++it) {
    const int k0 = it * kTile, st = it & 1;
    const uint16_t* ks = ks_buf + st * kTile * LD;
    const uint16_t* vs = vs_buf + st * kTile * LD;
    const int* kvalid = kvalid_buf + st * kTile;
    // Request tile it+1 into the other stage: every thread passed the barrier that ended
    // iteration it−1, the last reader of that stage. An empty group keeps the count uniform.
    int next_vote = 0;
    if (it + 1 < n_tiles) {
      const int nst = st ^ 1;
      load_tile_async<HS, kTile>(ks_buf + nst * kTile * LD, base + C, rs, k0 + kTile, len);
      load_tile_async<HS, kTile>(vs_buf + nst * kTile * LD, base + 2 * C, rs, k0 + kTile, len);
      next_vote = write_key_valid(kvalid_buf + nst * kTile, mask, b, Tn, k0 + kTile, len);
    }
    cp_async_commit();
    cp_async_wait_all_but_one();  // this thread's copies of tile it have landed
    // The barrier makes every thread's copies (and validity stores) of tile it visible; a tile
    // with no valid key (all padding) is skipped by every thread alike. Nothing reads stage st
    // after a skip, so the next iteration may refill it without another barrier.
    const bool any = __syncthreads_or(vote) != 0;
    vote = next_vote;
    if (!any) continue;

    float s[kTile / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < HS / 16; ++kk)
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n) {
        uint32_t b0, b1;
        load_b_t<LD>(b0, b1, ks, n * 8, kk * 16, lane);
        mma16816<T>(s[n], qf[kk], b0, b1);
      }

    // Masking is needed only on tiles with padding, the sequence end or the diagonal.
    const bool need_mask = mask != nullptr || k0 + kTile > len || (kCausal && k0 + kTile > q0);
    if (need_mask) {
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = n * 8 + c + (e & 1), row = row0 + (e >> 1) * 8;
          if (!kvalid[j] || (kCausal && k0 + j > row)) s[n][e] = -INFINITY;
        }
    }

    // Online softmax per row (r = 0: row g, r = 1: row g+8), over the quad of lanes that hold it.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[r], mx);
      // A row with no valid key so far keeps m = −inf; subtracting 0 then keeps every p at 0
      // instead of exp(−inf + inf) = NaN.
      const float m_sub = m_new == -INFINITY ? 0.0f : m_new * scale_log2;
      const float alpha = exp2f(m[r] * scale_log2 - m_sub);  // 0 while m[r] = −inf
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n) {
        s[n][2 * r] = exp2f(fmaf(s[n][2 * r], scale_log2, -m_sub));
        s[n][2 * r + 1] = exp2f(fmaf(s[n][2 * r + 1], scale_log2, -m_sub));
        sum += s[n][2 * r] + s[n][2 * r + 1];
      }
      l[r] = l[r] * alpha + sum;  // this lane's partial; the quad is summed once at the end
      m[r] = m_new;
#pragma unroll
      for (int n = 0; n < HS / 8; ++n) {
        o[n][2 * r] *= alpha;
        o[n][2 * r + 1] *= alpha;
      }
    }

    mma_acc_tile<T, kTile, HS, LD>(o, s, vs, lane);  // O += P·V
    __syncthreads();  // stage st is consumed: iteration it+1 requests tile it+2 into it
  }

  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // Fixed butterfly: every lane of the quad ends with the same sum, so the result is exact
    // run to run. l = 0 (no valid key) gives 0·inf = NaN outputs, the documented behaviour.
    float lt = l[r];
    lt += __shfl_xor_sync(0xffffffffu, lt, 1);
    lt += __shfl_xor_sync(0xffffffffu, lt, 2);
    inv[r] = 1.0f / lt;
    const int row = row0 + r * 8;
    if ((lane & 3) == 0 && row < len) lse[seq.stat(row)] = m[r] * scale + logf(lt);
  }
  const size_t C_ = static_cast<size_t>(C);
  store_rows<T, HS>(reinterpret_cast<uint16_t*>(out) + seq.first * C_ + h * HS, C_, qs, o, inv, q0, len, warp,
                    lane);
}

// --- backward ------------------------------------------------------------------------------
// D = Σ_d dO·O in fp32 for every (token row, head) pair r = row·NH + h of dout and out, in memory
// order; stored at D[b,h,t] (B·T layout, row = b·T + t) or, packed, at D[r] itself (Seq's layouts).
template <class T, int HS>
__global__ void flash_dot_kernel(float* D, const T* dout, const T* out, int Tn, int NH, size_t rows,
                                 bool packed) {
  const int lane = threadIdx.x & 31;
  const size_t step = static_cast<size_t>(gridDim.x) * (kDotThreads / 32);
  for (size_t r = static_cast<size_t>(blockIdx.x) * (kDotThreads / 32) + (threadIdx.x >> 5); r < rows;
       r += step) {
    const T* a = dout + r * HS;
    const T* o = out + r * HS;
    float acc = 0.0f;
#pragma unroll
    for (int d = lane; d < HS; d += 32) acc += to_f32(a[d]) * to_f32(o[d]);
    acc = warp_sum(acc);
    if (lane == 0) {
      const size_t h = r % NH, bt = r / NH, t = bt % Tn, b = bt / Tn;
      D[packed ? r : (b * NH + h) * Tn + t] = acc;
    }
  }
}

template <int HS>
constexpr size_t dkdv_smem_bytes() {
  constexpr int BQ = bwd_query_tile<HS>();  // K, V; two stages of Q, dO, lse and D
  return static_cast<size_t>(2 * kTile + 4 * BQ) * (HS + 8) * sizeof(uint16_t) + 4 * BQ * sizeof(float);
}

// grid (B·NH, key tiles of T); causal blocks with the first keys have the most query tiles and run
// first. dK and dV rows of padded or out-of-range keys come out exactly 0 (or are not stored).
// Packed: a key tile at or past its sequence's end exits, as the forward's query tiles.
template <class T, int HS, Keys K>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dkdv_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* D,
                          const int* key_mask, const int* cu_seqlens, int Tn, int NH, float scale,
                          float scale_log2) {
  constexpr int LD = HS + 8, BQ = bwd_query_tile<HS>();
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* ks = reinterpret_cast<uint16_t*>(smem);
  uint16_t* vs = ks + kTile * LD;
  uint16_t* qs_buf = vs + kTile * LD;                                // stage st at + st·BQ·LD
  uint16_t* dos_buf = qs_buf + 2 * BQ * LD;                          // likewise
  float* lse_buf = reinterpret_cast<float*>(dos_buf + 2 * BQ * LD);  // lse·log2(e); +inf past len (P = 0)
  float* d_buf = lse_buf + 2 * BQ;                                   // stage st at + st·BQ (both)

  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int k0 = blockIdx.y * kTile;
  constexpr bool kCausal = K == Keys::Causal;
  const int* mask = K == Keys::Packed ? nullptr : key_mask;
  const Seq seq = sequence_at<K>(cu_seqlens, b, h, Tn, NH);
  if (k0 >= seq.len) return;
  const int len = seq.len;
  const int C = NH * HS;
  const size_t rs = 3 * static_cast<size_t>(C), C_ = static_cast<size_t>(C);
  const uint16_t* base = reinterpret_cast<const uint16_t*>(qkv) + seq.first * rs + h * HS;
  const uint16_t* dbase = reinterpret_cast<const uint16_t*>(dout) + seq.first * C_ + h * HS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = (lane & 3) * 2;
  const int key0 = k0 + warp * kRowsPerWarp + g;  // this lane's keys: key0 and key0 + 8

  load_tile<HS, kTile>(ks, base + C, rs, k0, len);
  load_tile<HS, kTile>(vs, base + 2 * C, rs, k0, len);
  bool kv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = key0 + 8 * r;
    kv[r] = key < len && (mask == nullptr || mask[static_cast<size_t>(b) * Tn + key] != 0);
  }
  const bool any_key = __syncthreads_or(kv[0] || kv[1]) != 0;  // also orders the K, V tile loads

  float dk[HS / 8][4] = {}, dv[HS / 8][4] = {};

  // Causal: queries before k0 see none of these keys (k0 is a multiple of BQ). Query tiles are
  // double-buffered as the forward's key tiles: tile it+1 is requested (Q, dO by cp.async; lse, D
  // by plain stores) before tile it is used; a barrier ends every iteration.
  const int q_start = any_key ? (kCausal ? k0 : 0) : len;
  const int n_q = (len - q_start + BQ - 1) / BQ;
  auto request = [&](int stage, int q0) {
    load_tile_async<HS, BQ>(qs_buf + stage * BQ * LD, base, rs, q0, len);
    load_tile_async<HS, BQ>(dos_buf + stage * BQ * LD, dbase, C_, q0, len);
    if (threadIdx.x < BQ) {
      const int q = q0 + static_cast<int>(threadIdx.x);
      lse_buf[stage * BQ + threadIdx.x] = q < len ? lse[seq.stat(q)] * kLog2e : INFINITY;
      d_buf[stage * BQ + threadIdx.x] = q < len ? D[seq.stat(q)] : 0.0f;
    }
  };
  if (n_q > 0) request(0, q_start);
  cp_async_commit();
  for (int it = 0; it < n_q; ++it) {
    const int q0 = q_start + it * BQ, stage = it & 1;
    const uint16_t* qs = qs_buf + stage * BQ * LD;
    const uint16_t* dos = dos_buf + stage * BQ * LD;
    const float* lse_s = lse_buf + stage * BQ;
    const float* d_s = d_buf + stage * BQ;
    if (it + 1 < n_q) request(stage ^ 1, q0 + BQ);  // its last readers passed iteration it−1's barrier
    cp_async_commit();
    cp_async_wait_all_but_one();
    __syncthreads();  // tile it visible to all

    float st[BQ / 8][4];  // Sᵀ = K·Qᵀ (this warp's 16 keys × BQ queries)
    mma_rows_bt<T, BQ, HS, LD>(st, ks, warp * kRowsPerWarp, qs, lane);
    // Pᵀ = exp(scale·Sᵀ − lse), exactly 0 where the pair is masked.
#pragma unroll
    for (int n = 0; n < BQ / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = n * 8 + c + (e & 1), key = key0 + (e >> 1) * 8, q = q0 + j;
        const bool ok = kv[e >> 1] && q < len && (!kCausal || q >= key);
        st[n][e] = ok ? exp2f(fmaf(st[n][e], scale_log2, -lse_s[j])) : 0.0f;
      }
    }
    mma_acc_tile<T, BQ, HS, LD>(dv, st, dos, lane);  // dV += Pᵀ·dO
    float dpt[BQ / 8][4];                            // dPᵀ = V·dOᵀ
    mma_rows_bt<T, BQ, HS, LD>(dpt, vs, warp * kRowsPerWarp, dos, lane);
    // dSᵀ = scale·Pᵀ ⊙ (dPᵀ − D) (the naive path's factor order), in place of Pᵀ
#pragma unroll
    for (int n = 0; n < BQ / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[n][e] = scale * st[n][e] * (dpt[n][e] - d_s[n * 8 + c + (e & 1)]);
    mma_acc_tile<T, BQ, HS, LD>(dk, st, qs, lane);  // dK += dSᵀ·Q
    __syncthreads();  // this stage is consumed: iteration it+1 requests tile it+2 into it
  }

  const float one[2] = {1.0f, 1.0f};
  uint16_t* dbh = reinterpret_cast<uint16_t*>(dqkv) + seq.first * rs + h * HS;
  store_rows<T, HS>(dbh + C, rs, ks, dk, one, k0, len, warp, lane);
  store_rows<T, HS>(dbh + 2 * C, rs, vs, dv, one, k0, len, warp, lane);
}

template <int HS>
constexpr size_t dq_smem_bytes() {  // Q, dO, two K and two V tiles, two key-validity rows
  return static_cast<size_t>(6 * kTile) * (HS + 8) * sizeof(uint16_t) + 2 * kTile * sizeof(int);
}

// grid (B·NH, query tiles of T), heaviest causal tiles first; packed tiles past the end exit.
template <class T, int HS, Keys K>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dq_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* D,
                        const int* key_mask, const int* cu_seqlens, int Tn, int NH, float scale,
                        float scale_log2) {
  constexpr int LD = HS + 8;
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem);
  uint16_t* dos = qs + kTile * LD;
  uint16_t* ks_buf = dos + kTile * LD;                                // stage st at + st·kTile·LD
  uint16_t* vs_buf = ks_buf + 2 * kTile * LD;                         // likewise
  int* kvalid_buf = reinterpret_cast<int*>(vs_buf + 2 * kTile * LD);  // stage st at + st·kTile

  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kTile;
  constexpr bool kCausal = K == Keys::Causal;
  const int* mask = K == Keys::Packed ? nullptr : key_mask;
  const Seq seq = sequence_at<K>(cu_seqlens, b, h, Tn, NH);
  if (q0 >= seq.len) return;
  const int len = seq.len;
  const int C = NH * HS;
  const size_t rs = 3 * static_cast<size_t>(C), C_ = static_cast<size_t>(C);
  const uint16_t* base = reinterpret_cast<const uint16_t*>(qkv) + seq.first * rs + h * HS;
  const uint16_t* dbase = reinterpret_cast<const uint16_t*>(dout) + seq.first * C_ + h * HS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = (lane & 3) * 2;
  const int row0 = q0 + warp * kRowsPerWarp + g;
  const int kv_end = kCausal ? min(len, q0 + kTile) : len;
  const int n_tiles = (kv_end + kTile - 1) / kTile;

  // The forward's pipeline: key tile 0 requested into stage 0 first, Q and dO loaded meanwhile
  // (made visible by the first iteration's barrier).
  load_tile_async<HS, kTile>(ks_buf, base + C, rs, 0, len);
  load_tile_async<HS, kTile>(vs_buf, base + 2 * C, rs, 0, len);
  cp_async_commit();
  int vote = write_key_valid(kvalid_buf, mask, b, Tn, 0, len);
  load_tile<HS, kTile>(qs, base, rs, q0, len);
  load_tile<HS, kTile>(dos, dbase, C_, q0, len);
  float lse2[2], drow[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + 8 * r;
    const bool in = row < len;
    lse2[r] = in ? lse[seq.stat(row)] * kLog2e : INFINITY;
    drow[r] = in ? D[seq.stat(row)] : 0.0f;
  }

  float dq[HS / 8][4] = {};

  for (int it = 0; it < n_tiles; ++it) {
    const int k0 = it * kTile, st = it & 1;
    const uint16_t* ks = ks_buf + st * kTile * LD;
    const uint16_t* vs = vs_buf + st * kTile * LD;
    const int* kvalid = kvalid_buf + st * kTile;
    int next_vote = 0;
    if (it + 1 < n_tiles) {  // the other stage's last readers passed iteration it−1's barrier
      const int nst = st ^ 1;
      load_tile_async<HS, kTile>(ks_buf + nst * kTile * LD, base + C, rs, k0 + kTile, len);
      load_tile_async<HS, kTile>(vs_buf + nst * kTile * LD, base + 2 * C, rs, k0 + kTile, len);
      next_vote = write_key_valid(kvalid_buf + nst * kTile, mask, b, Tn, k0 + kTile, len);
    }
    cp_async_commit();
    cp_async_wait_all_but_one();
    const bool any = __syncthreads_or(vote) != 0;  // tile it (and Q, dO) visible to all
    vote = next_vote;
    if (!any) continue;  // all padding; stage st is not read after the barrier

    // S = Q·Kᵀ and dP = dO·Vᵀ (this warp's 16 queries × 64 keys)
    float s[kTile / 8][4], dp[kTile / 8][4];
    mma_rows_bt<T, kTile, HS, LD>(s, qs, warp * kRowsPerWarp, ks, lane);
    mma_rows_bt<T, kTile, HS, LD>(dp, dos, warp * kRowsPerWarp, vs, lane);
    // dS = scale·P ⊙ (dP − D), P = exp(scale·S − lse), exactly 0 where the pair is masked
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = n * 8 + c + (e & 1), r = e >> 1, row = row0 + 8 * r;
        const bool ok = kvalid[j] && (!kCausal || k0 + j <= row);
        const float p = ok ? exp2f(fmaf(s[n][e], scale_log2, -lse2[r])) : 0.0f;
        s[n][e] = scale * p * (dp[n][e] - drow[r]);
      }
    }
    mma_acc_tile<T, kTile, HS, LD>(dq, s, ks, lane);  // dQ += dS·K
    __syncthreads();  // stage st is consumed: iteration it+1 requests tile it+2 into it
  }

  const float one[2] = {1.0f, 1.0f};
  store_rows<T, HS>(reinterpret_cast<uint16_t*>(dqkv) + seq.first * rs + h * HS, rs, qs, dq, one, q0, len,
                    warp, lane);
}

// --- host side -------------------------------------------------------------------------------
std::string dims(int B, int T, int C, int NH) {
  return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
         " NH=" + std::to_string(NH);
}

bool aligned_to(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

void check_sizes(const char* op, int B, int T, int C, int NH, StorageType t) {
  const std::string pre = std::string("[flash attention] ") + op + ": ";
  MPT_CHECK(t != StorageType::F32, pre +
                                       "fp32 storage is not supported (bf16 or fp16; attention.h is the fp32 "
                                       "path): " +
                                       dims(B, T, C, NH));
  MPT_CHECK(B > 0 && T > 0 && C > 0 && NH > 0, pre + "sizes must be positive: " + dims(B, T, C, NH));
  MPT_CHECK(C % NH == 0, pre + "C must be a multiple of NH (C % NH = " + std::to_string(C % NH) +
                             "): " + dims(B, T, C, NH));
  const int HS = C / NH;
  MPT_CHECK(HS == 64 || HS == 128, pre + "head size HS = C/NH = " + std::to_string(HS) +
                                       " is not supported (64 or 128): " + dims(B, T, C, NH));
  // Grid: B·NH in x, tiles of 64 in y (at most 65535); 3C and B·T·3C index in size_t.
  MPT_CHECK(static_cast<int64_t>(B) * NH <= INT_MAX &&
                (static_cast<int64_t>(T) + kTile - 1) / kTile <= 65535 &&
                static_cast<int64_t>(C) * 3 <= INT_MAX,
            pre + "too large: " + dims(B, T, C, NH));
}

// 16-bit tensors 16-byte aligned (whole-row 16-byte loads; C % 8 == 0 keeps every row aligned,
// which HS ∈ {64, 128} implies); fp32 and int tensors 4-byte aligned.
void check_pointers(const char* op, std::initializer_list<const void*> tensors16,
                    std::initializer_list<const void*> tensors4, int B, int T, int C, int NH) {
  const std::string pre = std::string("[flash attention] ") + op + ": ";
  for (const void* p : tensors16) {
    MPT_CHECK(p != nullptr, pre + "null pointer: " + dims(B, T, C, NH));
    MPT_CHECK(aligned_to(p, 16), pre +
                                     "a bf16/fp16 tensor (qkv, out, dout, dqkv) is not 16-byte aligned "
                                     "(rows are read with 16-byte loads)");
  }
  for (const void* p : tensors4) {
    MPT_CHECK(p != nullptr, pre + "null pointer (lse or scratch): " + dims(B, T, C, NH));
    MPT_CHECK(aligned_to(p, 4), pre + "lse and scratch must be 4-byte aligned");
  }
}

// Dynamic shared memory over the default 48 KiB needs the kernel's opt-in attribute: set once per
// kernel and context (its device), to the most any launch asked, not on every launch (a host call
// per layer, and one a graph capture need not see).
template <class K>
void prepare_smem(K kernel, size_t bytes, const char* op, Context& ctx) {
  MPT_CHECK(bytes <= ctx.info().smem_per_block_optin,
            std::string("[flash attention] ") + op + ": needs " + std::to_string(bytes) +
                " bytes of shared memory per block; this GPU allows " +
                std::to_string(ctx.info().smem_per_block_optin));
  if (bytes <= 48 * 1024 || !ctx.smem_opt_in_needed(reinterpret_cast<const void*>(kernel), bytes)) return;
  MPT_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

float softmax_scale(int HS) { return 1.0f / std::sqrt(static_cast<float>(HS)); }  // attention.cu's expression

// Rows of qkv, out, dout and dqkv a call's keys cover: B·T, or the packed sequences' rows.
size_t rows_of(const AttentionKeys& keys, int B, int T) {
  return keys.form == Keys::Packed ? static_cast<size_t>(keys.rows) : static_cast<size_t>(B) * T;
}

template <class T, int HS, Keys K>
void forward_launch(T* out, float* lse, const T* qkv, const AttentionKeys& at, int B, int Tn, int NH,
                    Context& ctx) {
  const size_t smem = fwd_smem_bytes<HS>();
  auto kernel = flash_fwd_kernel<T, HS, K>;
  prepare_smem(kernel, smem, "forward", ctx);
  const float scale = softmax_scale(HS);
  const dim3 grid(static_cast<unsigned>(B * NH), static_cast<unsigned>((Tn + kTile - 1) / kTile));
  kernel<<<grid, kThreads, smem, ctx.stream()>>>(out, lse, qkv, at.key_mask, at.cu_seqlens, Tn, NH, scale,
                                                 scale * kLog2e);
  MPT_CUDA_CHECK_LAUNCH("flash_fwd_kernel");
}

template <class T, int HS, Keys K>
void backward_launch(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse,
                     const AttentionKeys& at, float* D, int B, int Tn, int NH, Context& ctx) {
  const float scale = softmax_scale(HS);
  const size_t pairs = rows_of(at, B, Tn) * NH;  // (row, head) pairs of dout and out
  flash_dot_kernel<T, HS>
      <<<grid_for(pairs, kDotThreads / 32, ctx.info().sm_count), kDotThreads, 0, ctx.stream()>>>(
          D, dout, out, Tn, NH, pairs, K == Keys::Packed);
  MPT_CUDA_CHECK_LAUNCH("flash_dot_kernel");

  const dim3 grid(static_cast<unsigned>(B * NH), static_cast<unsigned>((Tn + kTile - 1) / kTile));
  const size_t smem_kv = dkdv_smem_bytes<HS>();
  auto kv_kernel = flash_bwd_dkdv_kernel<T, HS, K>;
  prepare_smem(kv_kernel, smem_kv, "backward", ctx);
  kv_kernel<<<grid, kThreads, smem_kv, ctx.stream()>>>(dqkv, dout, qkv, lse, D, at.key_mask, at.cu_seqlens,
                                                       Tn, NH, scale, scale * kLog2e);
  MPT_CUDA_CHECK_LAUNCH("flash_bwd_dkdv_kernel");

  const size_t smem_q = dq_smem_bytes<HS>();
  auto q_kernel = flash_bwd_dq_kernel<T, HS, K>;
  prepare_smem(q_kernel, smem_q, "backward", ctx);
  q_kernel<<<grid, kThreads, smem_q, ctx.stream()>>>(dqkv, dout, qkv, lse, D, at.key_mask, at.cu_seqlens, Tn,
                                                     NH, scale, scale * kLog2e);
  MPT_CUDA_CHECK_LAUNCH("flash_bwd_dq_kernel");
}

// The kernels' form for a call and its head size (64 or 128, checked by check_sizes): f is called
// with std::integral_constant arguments for HS and K.
template <class F>
void with_form(int HS, Keys form, F f) {
  const auto keys = [&](auto hs) {
    if (form == Keys::Causal)
      f(hs, std::integral_constant<Keys, Keys::Causal>{});
    else if (form == Keys::Packed)
      f(hs, std::integral_constant<Keys, Keys::Packed>{});
    else
      f(hs, std::integral_constant<Keys, Keys::Masked>{});
  };
  if (HS == 64)
    keys(std::integral_constant<int, 64>{});
  else
    keys(std::integral_constant<int, 128>{});
}

// The checks of every call: sizes and type, the pointers, and the keys' own arguments (a key mask
// int-aligned; cu_seqlens int-aligned device memory, rows in (0, B·T]).
void check_call(const char* op, std::initializer_list<const void*> tensors16,
                std::initializer_list<const void*> tensors4, const AttentionKeys& keys, int B, int T, int C,
                int NH, StorageType t) {
  check_sizes(op, B, T, C, NH, t);
  check_pointers(op, tensors16, tensors4, B, T, C, NH);
  const std::string pre = std::string("[flash attention] ") + op + ": ";
  if (keys.form == Keys::Masked)
    MPT_CHECK(keys.key_mask == nullptr || aligned_to(keys.key_mask, sizeof(int)),
              pre + "key_mask is not aligned to int");
  if (keys.form != Keys::Packed) return;
  MPT_CHECK(keys.cu_seqlens != nullptr && aligned_to(keys.cu_seqlens, sizeof(int)),
            pre + "cu_seqlens is null or not aligned to int: " + dims(B, T, C, NH));
  MPT_CHECK(keys.rows > 0 && static_cast<int64_t>(keys.rows) <= static_cast<int64_t>(B) * T,
            pre + "packed sequences hold " + std::to_string(keys.rows) +
                " rows, not in [1, B·T]: " + dims(B, T, C, NH));
}

}  // namespace
bool flash_attention_supported(int C, int NH, StorageType t) {
  if (t == StorageType::F32 || C <= 0 || NH <= 0 || C % NH != 0) return false;
  const int HS = C / NH;
  return HS == 64 || HS == 128;
}

size_t flash_attention_saved_bytes(int B, int T, int NH) {
  MPT_CHECK(B > 0 && T > 0 && NH > 0,
            "[flash attention] saved_bytes: sizes must be positive: B=" + std::to_string(B) +
                " T=" + std::to_string(T) + " NH=" + std::to_string(NH));
  return static_cast<size_t>(B) * NH * T * sizeof(float);
}

size_t flash_attention_scratch_bytes(int B, int T, int NH) {
  MPT_CHECK(B > 0 && T > 0 && NH > 0,
            "[flash attention] scratch_bytes: sizes must be positive: B=" + std::to_string(B) +
                " T=" + std::to_string(T) + " NH=" + std::to_string(NH));
  return static_cast<size_t>(B) * NH * T * sizeof(float);
}

template <class T>
void flash_attention_forward(T* out, float* lse, const T* qkv, const AttentionKeys& keys, int B, int Tn,
                             int C, int NH, Context& ctx) {
  MPT_PROFILE_RANGE("flash_attention_forward");
  check_call("forward", {out, qkv}, {lse}, keys, B, Tn, C, NH, storage_of<T>());
  if constexpr (!std::is_same_v<T, float>) {
    with_form(C / NH, keys.form, [&](auto hs, auto form) {
      forward_launch<T, decltype(hs)::value, decltype(form)::value>(out, lse, qkv, keys, B, Tn, NH, ctx);
    });
  }
}

template <class T>
void flash_attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse,
                              const AttentionKeys& keys, void* scratch, int B, int Tn, int C, int NH,
                              Context& ctx) {
  MPT_PROFILE_RANGE("flash_attention_backward");
  check_call("backward", {dqkv, dout, qkv, out}, {lse, scratch}, keys, B, Tn, C, NH, storage_of<T>());
  if constexpr (!std::is_same_v<T, float>) {
    with_form(C / NH, keys.form, [&](auto hs, auto form) {
      backward_launch<T, decltype(hs)::value, decltype(form)::value>(
          dqkv, dout, qkv, out, lse, keys, static_cast<float*>(scratch), B, Tn, NH, ctx);
    });
  }
}

// float is instantiated so that dispatch_storage callers link; it is refused by check_sizes.
#define MPT_INSTANTIATE(T)                                                                                 \
  template void flash_attention_forward<T>(T*, float*, const T*, const AttentionKeys&, int, int, int, int, \
                                           Context&);                                                      \
  template void flash_attention_backward<T>(T*, const T*, const T*, const T*, const float*,                \
                                            const AttentionKeys&, void*, int, int, int, int, Context&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE)

}  // namespace mptrain::cuda
