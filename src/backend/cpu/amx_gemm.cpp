// bf16 products on AMX tiles (backend/cpu/amx_gemm.h). Written with the compiler's AMX intrinsics
// behind a target attribute on each function that uses them (not file-wide flags: this file also
// builds on CPUs without AMX, where amx_available() keeps every call away from them).
//
// Tiles (palette 1, Intel SDM): C0..C3 the 2×2 block of 16×16 fp32 results, A0, A1 two 16×32 bf16
// row blocks of A, B0, B1 two 32×16 bf16 column blocks of B in VNNI form (16 rows of 16 column
// pairs: k and k+1 side by side). A 32×32 block of C takes, per 32 of K, 2 A loads, 2 B loads and
// 4 TDPBF16PS (each 16×16×32 multiply-adds): the most reuse 8 tiles allow.
#include "backend/cpu/amx_gemm.h"

#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace mptrain::cpu {

namespace {

#define MPT_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw")))

constexpr int kTile = 16;       // rows and fp32 columns of a C tile
constexpr int kTileK = 32;      // bf16 elements of K in a tile row (64 bytes)
constexpr int kPackBlock = 512;  // uint16 in one packed 32×16 block of B (1 KiB)

using u16 = std::uint16_t;

// Linux: a process asks for the AMX tile state before its first tile instruction
// (Documentation/arch/x86/xstate.rst); the permission holds for the whole process.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

struct AmxState {
  bool available = false, enabled = false;
  std::string refusal;
};

// Read once per process: what the CPU and Linux allow, and whether MPTRAIN_AMX=1 asks for it.
const AmxState& amx_state() {
  static const AmxState state = [] {
    AmxState s;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-bf16") || !__builtin_cpu_supports("amx-tile")) {
      s.refusal = "this CPU has no amx_bf16";
    } else if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
      s.refusal = std::string("Linux refused the tile state (arch_prctl ARCH_REQ_XCOMP_PERM: ") +
                  std::strerror(errno) + ")";
    } else {
      s.available = true;
    }
    const char* env = std::getenv("MPTRAIN_AMX");
    const bool asked = env && std::string(env) == "1";
    s.enabled = asked && s.available;
    if (asked && !s.available) std::fprintf(stderr, "amx: %s; bf16 products run on oneDNN\n", s.refusal.c_str());
    return s;
  }();
  return state;
}

// The tile configuration every thread loads: all eight tiles 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

MPT_AMX void load_tile_config() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = kTile;
  }
  // GCC 12 does not see that ldtilecfg reads the configuration: without this barrier it may drop
  // the stores above (seen at -O2 in a test program: a zero configuration, then #UD on the first
  // tile load).
  asm volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}

MPT_AMX void release_tiles() { _tile_release(); }

// A C tile's home: straight into C (fp32, unit column stride, all 16×16 inside), else the
// thread's 16×16 scratch, copied out (and in, when accumulating) around the products.
struct CTile {
  float* ptr;
  std::size_t stride_bytes;
};

// C block (MT × NT tiles of 16×16) += A rows · B: a[i] the first of A's 16 rows of tile row i at
// k = 0 (rows `lda_bytes` apart, K contiguous), b[j] packed column block j at k = 0 (kblocks
// blocks of 1 KiB in K order), c the tiles (row-major over i, j).
template <int MT, int NT>
MPT_AMX void tile_block(const u16* const* a, std::size_t lda_bytes, const u16* const* b, int kblocks, const CTile* c,
                        bool load_c) {
  if (load_c) {
    _tile_loadd(0, c[0].ptr, c[0].stride_bytes);
    if constexpr (NT == 2) _tile_loadd(1, c[1].ptr, c[1].stride_bytes);
    if constexpr (MT == 2) _tile_loadd(2, c[NT].ptr, c[NT].stride_bytes);
    if constexpr (MT == 2 && NT == 2) _tile_loadd(3, c[3].ptr, c[3].stride_bytes);
  } else {
    _tile_zero(0);
    if constexpr (NT == 2) _tile_zero(1);
    if constexpr (MT == 2) _tile_zero(2);
    if constexpr (MT == 2 && NT == 2) _tile_zero(3);
  }
  for (int kb = 0; kb < kblocks; ++kb) {
    _tile_loadd(4, a[0] + kb * kTileK, lda_bytes);
    if constexpr (MT == 2) _tile_loadd(5, a[1] + kb * kTileK, lda_bytes);
    _tile_loadd(6, b[0] + kb * kPackBlock, 64);
    if constexpr (NT == 2) _tile_loadd(7, b[1] + kb * kPackBlock, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NT == 2) _tile_dpbf16ps(1, 4, 7);
    if constexpr (MT == 2) _tile_dpbf16ps(2, 5, 6);
    if constexpr (MT == 2 && NT == 2) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c[0].ptr, c[0].stride_bytes);
  if constexpr (NT == 2) _tile_stored(1, c[1].ptr, c[1].stride_bytes);
  if constexpr (MT == 2) _tile_stored(2, c[NT].ptr, c[NT].stride_bytes);
  if constexpr (MT == 2 && NT == 2) _tile_stored(3, c[3].ptr, c[3].stride_bytes);
}

using BlockFn = void (*)(const u16* const*, std::size_t, const u16* const*, int, const CTile*, bool);
constexpr BlockFn kBlocks[2][2] = {{tile_block<1, 1>, tile_block<1, 2>}, {tile_block<2, 1>, tile_block<2, 2>}};

// One packed row of a VNNI block (16 column pairs, 64 bytes) from B's rows k and k + 1, columns
// [n0, n0 + 16) all inside N, rows along N (unit column stride): the two rows interleaved.
MPT_AMX void pack_pair_rows(u16* o, const u16* r0, const u16* r1) {
  const __m512i k0 = _mm512_maskz_loadu_epi16(0xFFFF, r0), k1 = _mm512_maskz_loadu_epi16(0xFFFF, r1);
  // Word c of row k goes to 2c, word c of row k + 1 (index 32 + c of the pair of sources) to 2c + 1.
  const __m512i order = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                         37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  _mm512_storeu_si512(o, _mm512_permutex2var_epi16(k0, order, k1));
}

// The same from B stored transposed (unit row stride: the pair k, k + 1 of column n is one
// 32-bit word), columns n0.. at `col` elements apart: one gather of 16 words.
MPT_AMX void pack_pair_cols(u16* o, const u16* r0, std::int64_t col) {
  const __m512i offsets = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                             _mm512_set1_epi32(static_cast<int>(col * sizeof(u16))));
  _mm512_storeu_si512(o, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), 0xFFFF, offsets, r0, 1));
}

// B[K, N] (strides lb) into VNNI blocks: out[(nt·kblocks + kb)·512 + p·32 + c·2 + e] =
// B[kb·32 + 2p + e][nt·16 + c], zero past N. Column blocks [nt0, nt1).
MPT_AMX void pack_b(u16* out, const u16* b, GemmLayout lb, int K, int N, int nt0, int nt1) {
  const int kblocks = K / kTileK;
  // The gather's offsets are 32-bit: a column stride of more than 2^26 elements takes the loop.
  const bool words = lb.row == 1 && lb.col * sizeof(u16) * kTile < (std::int64_t{1} << 31);
  for (int nt = nt0; nt < nt1; ++nt)
    for (int kb = 0; kb < kblocks; ++kb) {
      u16* blk = out + (static_cast<std::size_t>(nt) * kblocks + kb) * kPackBlock;
      const int n0 = nt * kTile, cols = std::min(kTile, N - n0);
      for (int p = 0; p < kTileK / 2; ++p) {
        const int k = kb * kTileK + 2 * p;
        const u16* r0 = b + k * lb.row + n0 * lb.col;
        const u16* r1 = r0 + lb.row;
        u16* o = blk + p * 2 * kTile;
        if (cols == kTile && lb.col == 1) {
          pack_pair_rows(o, r0, r1);
          continue;
        }
        if (cols == kTile && words) {
          pack_pair_cols(o, r0, lb.col);
          continue;
        }
        int c = 0;
        for (; c < cols; ++c) {
          o[2 * c] = r0[c * lb.col];
          o[2 * c + 1] = r1[c * lb.col];
        }
        for (; c < kTile; ++c) o[2 * c] = o[2 * c + 1] = 0;
      }
    }
}

// A[M, K] (strides la) as rows along K, M padded to a multiple of 16 with zero rows: `out` is
// [Mpad][K]. Rows [m0, m1).
// Rows m..m+7 of a transposed A (unit row stride: column k of the stored matrix is row k of
// A^T) into out[m..m+7][k..k+7] for every k: 8×8 transposes of 16-bit words in SSE registers (the
// scalar strided copy took longer than the product on dW = X^T·dY).
void pack_a_transposed8(u16* out, const u16* a, std::int64_t col, int K, int m) {
  for (int k = 0; k < K; k += 8) {
    __m128i r[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + m + (k + i) * col));
    const __m128i a0 = _mm_unpacklo_epi16(r[0], r[1]), a1 = _mm_unpackhi_epi16(r[0], r[1]),
                  a2 = _mm_unpacklo_epi16(r[2], r[3]), a3 = _mm_unpackhi_epi16(r[2], r[3]),
                  a4 = _mm_unpacklo_epi16(r[4], r[5]), a5 = _mm_unpackhi_epi16(r[4], r[5]),
                  a6 = _mm_unpacklo_epi16(r[6], r[7]), a7 = _mm_unpackhi_epi16(r[6], r[7]);
    const __m128i b0 = _mm_unpacklo_epi32(a0, a2), b1 = _mm_unpackhi_epi32(a0, a2), b2 = _mm_unpacklo_epi32(a1, a3),
                  b3 = _mm_unpackhi_epi32(a1, a3), b4 = _mm_unpacklo_epi32(a4, a6), b5 = _mm_unpackhi_epi32(a4, a6),
                  b6 = _mm_unpacklo_epi32(a5, a7), b7 = _mm_unpackhi_epi32(a5, a7);
    const __m128i c[8] = {_mm_unpacklo_epi64(b0, b4), _mm_unpackhi_epi64(b0, b4), _mm_unpacklo_epi64(b1, b5),
                          _mm_unpackhi_epi64(b1, b5), _mm_unpacklo_epi64(b2, b6), _mm_unpackhi_epi64(b2, b6),
                          _mm_unpacklo_epi64(b3, b7), _mm_unpackhi_epi64(b3, b7)};
    for (int i = 0; i < 8; ++i)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + static_cast<std::size_t>(m + i) * K + k), c[i]);
  }
}

void pack_a(u16* out, const u16* a, GemmLayout la, int M, int K, int m0, int m1) {
  for (int m = m0; m < m1; ++m) {
    if (la.row == 1 && m % 8 == 0 && m + 8 <= std::min(M, m1)) {
      pack_a_transposed8(out, a, la.col, K, m);
      m += 7;
      continue;
    }
    u16* o = out + static_cast<std::size_t>(m) * K;
    if (m >= M) {
      std::memset(o, 0, sizeof(u16) * K);
      continue;
    }
    const u16* r = a + m * la.row;
    if (la.col == 1) {
      std::memcpy(o, r, sizeof(u16) * K);
    } else {
      for (int k = 0; k < K; ++k) o[k] = r[k * la.col];
    }
  }
}

// One product of a batch: everything a thread needs to compute any 32×32 block of it.
struct Product {
  void* c;
  StorageType tc;
  GemmLayout lc;
  const u16* a;        // A's rows along K, lda elements apart (A itself, or its packed copy)
  std::int64_t lda;
  bool a_padded;       // A holds Mpad rows (a packed copy): no M tail to copy
  const u16* bpack;    // [ntiles][kblocks][512]
  int M, N, K;
  bool accumulate;
};

// The thread's scratch: C tiles that do not go straight into C, and an M tail's A rows.
struct ThreadScratch {
  alignas(64) float c[4][kTile * kTile];
  std::vector<u16> a_tail;  // [32][K]
};

// C's 16×16 tile at (m0, n0) holds rows [m0, m0 + rows) and columns [n0, n0 + cols) of C.
bool direct_tile(const Product& p, int rows, int cols) {
  return p.tc == StorageType::F32 && p.lc.col == 1 && rows == kTile && cols == kTile;
}

void gather_tile(const Product& p, int m0, int n0, int rows, int cols, float* t) {
  std::memset(t, 0, sizeof(float) * kTile * kTile);
  const float* c = static_cast<const float*>(p.c);
  for (int r = 0; r < rows; ++r)
    for (int q = 0; q < cols; ++q) t[r * kTile + q] = c[(m0 + r) * p.lc.row + (n0 + q) * p.lc.col];
}

void scatter_tile(const Product& p, int m0, int n0, int rows, int cols, const float* t) {
  if (p.tc == StorageType::F32) {
    float* c = static_cast<float*>(p.c);
    for (int r = 0; r < rows; ++r)
      for (int q = 0; q < cols; ++q) c[(m0 + r) * p.lc.row + (n0 + q) * p.lc.col] = t[r * kTile + q];
    return;
  }
  u16* c = static_cast<u16*>(p.c);  // bf16: one round to nearest even from the fp32 tile
  for (int r = 0; r < rows; ++r)
    for (int q = 0; q < cols; ++q) c[(m0 + r) * p.lc.row + (n0 + q) * p.lc.col] = f32_to_bf16(t[r * kTile + q]).bits;
}

// The 32×32 (or smaller, at the edges) block of C at (m0, n0).
void compute_block(const Product& p, int m0, int n0, ThreadScratch& s) {
  const int mt = std::min(2, (p.M - m0 + kTile - 1) / kTile), nt = std::min(2, (p.N - n0 + kTile - 1) / kTile);
  const int kblocks = p.K / kTileK;
  const u16* a[2];
  std::size_t lda_bytes = sizeof(u16) * p.lda;
  const bool tail = !p.a_padded && m0 + mt * kTile > p.M;
  if (tail) {  // copy the last rows into zero-padded scratch: a tile always reads 16 rows
    const int rows = p.M - m0;
    s.a_tail.assign(static_cast<std::size_t>(2 * kTile) * p.K, 0);
    for (int r = 0; r < rows; ++r)
      std::memcpy(s.a_tail.data() + static_cast<std::size_t>(r) * p.K, p.a + (m0 + r) * p.lda, sizeof(u16) * p.K);
    a[0] = s.a_tail.data();
    a[1] = a[0] + static_cast<std::size_t>(kTile) * p.K;
    lda_bytes = sizeof(u16) * p.K;
  } else {
    a[0] = p.a + m0 * p.lda;
    a[1] = a[0] + kTile * p.lda;
  }
  const u16* b[2];
  for (int j = 0; j < nt; ++j) b[j] = p.bpack + static_cast<std::size_t>(n0 / kTile + j) * kblocks * kPackBlock;
  CTile c[4];
  int rows[4], cols[4];
  for (int i = 0; i < mt; ++i)
    for (int j = 0; j < nt; ++j) {
      const int t = i * nt + j, tm = m0 + i * kTile, tn = n0 + j * kTile;
      rows[t] = std::min(kTile, p.M - tm);
      cols[t] = std::min(kTile, p.N - tn);
      if (direct_tile(p, rows[t], cols[t])) {
        c[t] = {static_cast<float*>(p.c) + tm * p.lc.row + tn, sizeof(float) * p.lc.row};
      } else {
        c[t] = {s.c[t], sizeof(float) * kTile};
        if (p.accumulate) gather_tile(p, tm, tn, rows[t], cols[t], s.c[t]);
      }
    }
  kBlocks[mt - 1][nt - 1](a, lda_bytes, b, kblocks, c, p.accumulate);
  for (int i = 0; i < mt; ++i)
    for (int j = 0; j < nt; ++j) {
      const int t = i * nt + j;
      if (c[t].ptr == s.c[t]) scatter_tile(p, m0 + i * kTile, n0 + j * kTile, rows[t], cols[t], s.c[t]);
    }
}

// The blocks of one product a thread computes: rows [mb0, mb1) of 32-row blocks, over every
// column, the columns in chunks whose packed B stays in the core's L2 while the rows pass.
void compute_rows(const Product& p, int mb0, int mb1, ThreadScratch& s) {
  const int chunk = std::max(32, static_cast<int>((768 * 1024) / (sizeof(u16) * p.K)) / 32 * 32);
  for (int nc = 0; nc < p.N; nc += chunk)
    for (int mb = mb0; mb < mb1; ++mb)
      for (int n0 = nc; n0 < std::min(p.N, nc + chunk); n0 += 2 * kTile) compute_block(p, mb * 2 * kTile, n0, s);
}

std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }


MPT_AMX void tile_products(long iterations) {
  alignas(64) static constexpr u16 kZeros[kTile * kTileK] = {};
  load_tile_config();
  _tile_loadd(4, kZeros, 64);
  _tile_loadd(5, kZeros, 64);
  _tile_loadd(6, kZeros, 64);
  _tile_loadd(7, kZeros, 64);
  for (long i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  release_tiles();
}

}  // namespace

double amx_tile_peak_flops() {
  if (!amx_available()) return 0.0;
  constexpr long kIterations = 20000;  // 80,000 products of 16,384 FLOP: ~10 ms a thread
  double best = 0.0;
  for (int run = 0; run < 8; ++run) {
    int threads = 1;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
    {
#pragma omp single
      threads = omp_get_num_threads();
      tile_products(kIterations);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, 4.0 * kIterations * 2.0 * kTile * kTile * kTileK * threads / s);
  }
  return best;
}


bool amx_available() { return amx_state().available; }
std::string amx_refusal() { return amx_state().refusal; }
bool amx_enabled() { return amx_state().enabled; }

bool amx_gemm(void* c, StorageType tc, GemmLayout lc, const void* a, StorageType ta, GemmLayout la, const void* b,
              StorageType tb, GemmLayout lb, int nb0, int nb1, int M, int N, int K, bool accumulate,
              AmxBuffers& buffers) {
  if (ta != StorageType::BF16 || tb != StorageType::BF16 || K % kTileK != 0 || K == 0) return false;
  if (tc != StorageType::F32 && (tc != StorageType::BF16 || accumulate)) return false;
  if (!amx_available()) return false;
  const int ntiles = (N + kTile - 1) / kTile, mblocks = (M + 2 * kTile - 1) / (2 * kTile);
  const int batches = nb0 * nb1;
  const bool pack_all_a = la.col != 1;
  const std::size_t b_elems = static_cast<std::size_t>(ntiles) * (K / kTileK) * kPackBlock;
  const std::size_t a_elems = pack_all_a ? round_up(M, kTile) * static_cast<std::size_t>(K) : 0;
  const int threads = omp_get_max_threads();
  // Many products (attention's heads): one a thread, each packing its own B. Few (a layer's one
  // product): every thread on each, B packed once between them.
  const bool per_thread = batches >= threads;
  // Thread t packs into buffers.b[t] (and .a[t]) on its own products, or all threads into [0].
  const auto grow = [](std::vector<u16>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
  };
  buffers.b.resize(std::max<std::size_t>(buffers.b.size(), threads));
  buffers.a.resize(std::max<std::size_t>(buffers.a.size(), threads));
  if (per_thread) {
    for (int t = 0; t < threads; ++t) grow(buffers.b[t], b_elems), grow(buffers.a[t], a_elems);
  } else {
    grow(buffers.b[0], b_elems), grow(buffers.a[0], a_elems);
  }
  u16* shared_b = buffers.b[0].data();
  u16* shared_a = buffers.a[0].data();
  const u16* A = static_cast<const u16*>(a);
  const u16* B = static_cast<const u16*>(b);
  auto product = [&](int i, int j, const u16* bpack, const u16* apacked) {
    Product p{};
    p.c = static_cast<char*>(c) + (i * lc.batch0 + j * lc.batch1) * static_cast<std::int64_t>(storage_bytes(tc));
    p.tc = tc, p.lc = lc, p.M = M, p.N = N, p.K = K, p.accumulate = accumulate, p.bpack = bpack;
    p.a = apacked ? apacked : A + i * la.batch0 + j * la.batch1;
    p.lda = apacked ? K : la.row;
    p.a_padded = apacked != nullptr;
    return p;
  };
#pragma omp parallel
  {
    load_tile_config();
    ThreadScratch scratch;
    if (per_thread) {
      u16* bpack = buffers.b[omp_get_thread_num()].data();
      u16* apack = buffers.a[omp_get_thread_num()].data();
#pragma omp for schedule(static)
      for (int ij = 0; ij < batches; ++ij) {
        const int i = ij / nb1, j = ij % nb1;
        pack_b(bpack, B + i * lb.batch0 + j * lb.batch1, lb, K, N, 0, ntiles);
        if (pack_all_a) pack_a(apack, A + i * la.batch0 + j * la.batch1, la, M, K, 0, static_cast<int>(round_up(M, kTile)));
        compute_rows(product(i, j, bpack, pack_all_a ? apack : nullptr), 0, mblocks, scratch);
      }
    } else {
      for (int ij = 0; ij < batches; ++ij) {
        const int i = ij / nb1, j = ij % nb1;
#pragma omp for schedule(static)
        for (int nt = 0; nt < ntiles; ++nt) pack_b(shared_b, B + i * lb.batch0 + j * lb.batch1, lb, K, N, nt, nt + 1);
        if (pack_all_a) {
#pragma omp for schedule(static)
          for (int m = 0; m < static_cast<int>(round_up(M, kTile)); m += 8)
            pack_a(shared_a, A + i * la.batch0 + j * la.batch1, la, M, K, m, m + 8);
        }
        const Product p = product(i, j, shared_b, pack_all_a ? shared_a : nullptr);
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
        compute_rows(p, mblocks * t / n, mblocks * (t + 1) / n, scratch);
#pragma omp barrier
      }
    }
    release_tiles();
  }
  return true;
}

}  // namespace mptrain::cpu
