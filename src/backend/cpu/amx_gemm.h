// bf16 matrix products on Intel's AMX tiles (Sapphire Rapids and later), written with the
// compiler's intrinsics: an alternative to oneDNN's bf16 GEMM, taken by the CPU backend's products
// (gemm_batched_typed) only where asked for with MPTRAIN_AMX=1.
//
// Why it exists, and why it is not the default: Debian's oneDNN 2.6.3 reaches 1.1-1.8 TFLOP/s of
// a Sapphire Rapids' tiles on GPT-2's layer shapes, and Debian's libxsmm 1.17 has no AMX code at all
// (its newest target is Cooper Lake's AVX512-BF16), so a kernel of our own was the way past that
// library's ceiling. On the host it was measured on (docs/benchmarks/2026-12-07.md: an Intel Xeon,
// family 6 model 207, 2 vCPUs) oneDNN 2.6.3 already runs these shapes on the tiles, and this
// kernel's GPT-2 124M bf16 step is 1.17x slower than oneDNN's (2,388-2,442 against 2,044-2,090 ms,
// three alternated rounds): the two vCPUs' tiles give 2.2 TFLOP/s together with no loads (one gives
// 1.5, so they do not scale as the FMA units do), and a 2×2 block's four tile loads per four tile
// products cost 58% of that. bench_gemm keeps both paths side by side for the next AMX host.
//
// The product: C[M,N] (=, or += with accumulate) A[M,K]·B[K,N], A and B bf16 in any strides, C
// fp32 or bf16 (rounded once from the fp32 tile), for every (i, j) of a batch, as
// gemm_batched_typed takes it (backend/ops/gemm.h). B is packed once per call into the tiles' VNNI
// layout (pairs along K interleaved); A is read in place where its rows run along K, else packed.
// Each C element is one chain of tile products in K order whatever the thread count, so results
// do not depend on it (they differ from oneDNN's, whose order differs: the goldens keep exact
// hashes per CPU).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/ops/gemm.h"
#include "core/dtype.h"

namespace mptrain::cpu {

// Whether the tiles can run here: the CPU has amx_bf16 and amx_tile (cpuid), and Linux granted the
// tile state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once, before the first tile instruction: the
// permission is the process's, so every thread it starts may then use the tiles).
bool amx_available();
// Why not ("" when they can).
std::string amx_refusal();
// Whether the CPU backend's products take the tiles: MPTRAIN_AMX=1 and amx_available(). Asked for
// where the tiles cannot run, the refusal is said once on stderr ("amx: ...; bf16 products run on
// oneDNN") and every product runs on oneDNN.
bool amx_enabled();

// The tiles' rate here, measured now: TDPBF16PS on tiles already loaded (no memory traffic), on
// every OpenMP thread at once, the best of a few ~10 ms runs, in FLOP/s; 0 without tiles. What a
// profile's bf16 products are measured against: the two vCPUs of the host of 2026-12-07 gave
// 2.2 TFLOP/s together, less than the 4.8 their clock and 1,024 FLOP a cycle a core would make.
double amx_tile_peak_flops();

// The packing buffers products reuse one after another (the CPU backend's Context keeps them):
// grown to the largest product's, never shrunk, so a step pays no allocation, zeroing or page
// faults for them after its first products.
struct AmxBuffers {
  std::vector<std::vector<std::uint16_t>> b, a;  // one of each per thread
};

// The product on the tiles, or false when it does not take it (no tiles here, or a shape or dtype
// it leaves to oneDNN: operands not bf16, C neither fp32 nor bf16, K not a multiple of 32, bf16 C
// with accumulate). Same arguments as gemm_batched_typed, and the buffers it packs into.
bool amx_gemm(void* c, StorageType tc, GemmLayout lc, const void* a, StorageType ta, GemmLayout la, const void* b,
              StorageType tb, GemmLayout lb, int nb0, int nb1, int M, int N, int K, bool accumulate,
              AmxBuffers& buffers);

}  // namespace mptrain::cpu
