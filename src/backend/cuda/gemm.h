// Matrix products through cuBLASLt, with the row-major semantics of cpu::gemm:
//   C[M,N] = op(A)·op(B) (+ C when accumulate)
//   op(A) = A stored [M,K] (trans_a false) or A^T with A stored [K,M]
//   op(B) = B stored [K,N] (trans_b false) or B^T with B stored [N,K]
// A and B share one storage type `tab`; C is either that type or fp32 (fp32 master gradients
// from 16-bit operands). Products accumulate in fp32 in every mode:
//   ComputeType::F32   fp32 operands, CUBLAS_COMPUTE_32F: no tensor cores (the ladder's first row)
//   ComputeType::TF32  fp32 operands, CUBLAS_COMPUTE_32F_FAST_TF32: tensor cores, 10-bit mantissa inputs
//   bf16 / fp16 operands: tensor cores, CUBLAS_COMPUTE_32F (their arithmetic is their storage's)
// Epilogues (fused into the product; row-major terms):
//   Bias       C = op(A)·op(B) + bias[N]                  (bias in C's type)
//   GeluBias   aux[M,N] = op(A)·op(B) + bias[N] (bias may be null);  C = gelu_tanh(aux)
//   DGelu      C = (op(A)·op(B)) ⊙ gelu'(aux[M,N])       (accumulate must be false)
//   BiasGradB  also writes (=) bias_grad[N] = Σ_k op(B)[k, n], the column sums of op(B)
// aux has C's type and row stride N (cuBLASLt needs N % 8 == 0 for it).
// Every distinct (sizes, transposes, types, math, epilogue, accumulate, pointer alignment) is
// planned once and cached in the Context. All pointers are device pointers; asynchronous.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cuda/context.h"
#include "core/dtype.h"

namespace mptrain::cuda {

// What cuBLASLt does after a product (its own epilogue kinds, in row-major terms below), not an
// op's epilogue (backend/backend.h's Epilogue, which a launcher maps onto these).
enum class LtEpilogue { None, Bias, GeluBias, DGelu, BiasGradB };

struct GemmEpilogue {
  LtEpilogue kind = LtEpilogue::None;
  const void* bias = nullptr;  // Bias, GeluBias
  void* bias_grad = nullptr;   // BiasGradB
  void* aux = nullptr;         // GeluBias (written), DGelu (read)
};

const char* epilogue_name(LtEpilogue e);

void gemm(void* c, StorageType tc, const void* a, const void* b, StorageType tab, int M, int N, int K,
          bool trans_a, bool trans_b, bool accumulate, ComputeType math, const GemmEpilogue& epilogue,
          Context& ctx);

// A strided batch of `count` independent products of the same shape: product i reads
// a + i·stride_a, b + i·stride_b and writes c + i·stride_c (strides in elements of the
// operand's own type; count 1 is a plain product). The batch is part of the plan cache key.
struct GemmBatch {
  int count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// gemm() over a strided batch, without an epilogue (the attention products).
void gemm_batched(void* c, StorageType tc, const void* a, const void* b, StorageType tab, int M, int N, int K,
                  bool trans_a, bool trans_b, bool accumulate, ComputeType math, const GemmBatch& batch,
                  Context& ctx);

// C = alpha·op(A)·op(B) + beta·C, no epilogue (Muon's Newton–Schulz products: MatmulArgs).
void gemm_scaled(void* c, StorageType tc, const void* a, const void* b, StorageType tab, int M, int N, int K,
                 bool trans_a, bool trans_b, float alpha, float beta, ComputeType math, Context& ctx);

// Number of cached plans (tests check that repeated shapes reuse them).
size_t gemm_plan_count(Context& ctx);

// What cuBLASLt's heuristic leaves on the table for one product (bench/cuda/gemm_sweep.cpp): up
// to max_algos of its algorithms for gemm()'s arguments, in its order (rank 0 is the one gemm()
// plans), each timed over `iters` launches after two warm-up ones (CUDA events; ms -1 where
// cuBLASLt refused to run it). The plan cache is not touched; C is written (accumulating
// products grow it). Synchronizes.
struct GemmAlgoTiming {
  int rank;
  float ms;
  int algo_id, tile, splitk, reduction;  // cuBLASLt's config attributes (-1 where unreadable)
  float waves;
};
std::vector<GemmAlgoTiming> gemm_sweep(void* c, StorageType tc, const void* a, const void* b, StorageType tab,
                                       int M, int N, int K, bool trans_a, bool trans_b, bool accumulate,
                                       ComputeType math, const GemmEpilogue& ep, int max_algos, int iters,
                                       Context& ctx);

}  // namespace mptrain::cuda
