// Matrix products for the CPU backend: oneDNN matmul, one cached primitive per distinct
// (sizes, layouts, dtypes, accumulate). Defined in cpu/context.cpp, the one file that includes
// oneDNN; gemm_mixed.h builds every product of the backend on it. oneDNN failures throw
// mptrain::LibraryError. Results are reproducible run to run for a fixed thread count.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace mptrain::cpu {

class Context;

// Layout of one operand, in elements: element (r, c) of matrix (i, j) is at
//   ptr[i*batch0 + j*batch1 + r*row + c*col].
// A transpose is a swap of row and col; a sub-matrix or a head of a packed tensor is a pointer
// offset plus the parent's strides, so no operand is ever copied. int64_t because that is
// oneDNN's dimension type and batch offsets of B·NH·T·T tensors exceed 2^31.
struct GemmLayout {
  std::int64_t batch0 = 0;
  std::int64_t batch1 = 0;
  std::int64_t row = 0;
  std::int64_t col = 1;
};

// For every (i, j) in [0,nb0)×[0,nb1): C_ij[M,N] = A_ij[M,K]·B_ij[K,N] (+ C_ij when accumulate).
// Attention uses (i, j) = (b, h) to multiply heads of qkv in place, and sub-blocks to skip the
// masked half of causal products. a and b in fp32, bf16 or fp16, c in fp32 or bf16/fp16;
// products accumulate in fp32 (oneDNN's bf16 kernels on AVX512-BF16 or AMX; our own AMX kernel with
// MPTRAIN_AMX=1, backend/cpu/amx_gemm.h). Throws LibraryError
// where oneDNN has no kernel for the combination on this CPU (fp16 needs AVX512-FP16);
// gemm_supports() asks first.
void gemm_batched_typed(void* c, StorageType tc, GemmLayout lc, const void* a, StorageType ta, GemmLayout la,
                        const void* b, StorageType tb, GemmLayout lb, int nb0, int nb1, int M, int N, int K,
                        bool accumulate, Context& ctx);
bool gemm_supports(StorageType tc, StorageType ta, StorageType tb, Context& ctx);
// The same product on oneDNN alone (where gemm_batched_typed may take our AMX kernel,
// backend/cpu/amx_gemm.h): bench_gemm's reference, and what the AMX tests compare with.
void gemm_onednn(void* c, StorageType tc, GemmLayout lc, const void* a, StorageType ta, GemmLayout la, const void* b,
                 StorageType tb, GemmLayout lb, int nb0, int nb1, int M, int N, int K, bool accumulate, Context& ctx);

}  // namespace mptrain::cpu
