// Matrix products for the CPU backend (oneDNN matmul; primitives cached by shape).
//
// gemm: C[M,N] = op(A)·op(B) (+ C when accumulate), row-major, fp32.
//   op(A) = A   stored [M,K]   (trans_a == false)   or A^T with A stored [K,M]
//   op(B) = B   stored [K,N]   (trans_b == false)   or B^T with B stored [N,K]
// matmul_forward/backward are the linear layer built on it, with weights in
// Hugging Face's Conv1D layout [C, OC]: out = inp·weight + bias.
// gemm() and gemm_batched() are defined in cpu/context.cpp, the one file that includes oneDNN;
// the linear layer is in cpu/gemm.cpp. oneDNN failures throw mptrain::LibraryError. Results are
// reproducible run to run for a fixed thread count; dbias does not depend on the thread count.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace mptrain::cpu {

class Context;

void gemm(float* c, const float* a, const float* b, int M, int N, int K, bool trans_a, bool trans_b,
          bool accumulate, Context& ctx);

// Layout of one operand of gemm_batched, in floats: element (r, c) of matrix (i, j) is at
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
// The general form behind gemm(); attention uses it with (i, j) = (b, h) to multiply heads of
// qkv in place, and with sub-blocks to skip the masked half of causal products. Every distinct
// (sizes, layouts, accumulate) gets one cached oneDNN primitive.
void gemm_batched(float* c, GemmLayout lc, const float* a, GemmLayout la, const float* b, GemmLayout lb,
                  int nb0, int nb1, int M, int N, int K, bool accumulate, Context& ctx);

// gemm_batched with 16-bit operands: a and b in fp32, bf16 or fp16, c in fp32 or bf16/fp16;
// products accumulate in fp32 (oneDNN's bf16 kernels on AVX512-BF16/AMX). Strides are in
// elements. Throws LibraryError where oneDNN has no kernel for the combination on this CPU
// (fp16 needs AVX512-FP16); gemm_supports() asks first.
void gemm_batched_typed(void* c, StorageType tc, GemmLayout lc, const void* a, StorageType ta, GemmLayout la,
                        const void* b, StorageType tb, GemmLayout lb, int nb0, int nb1, int M, int N, int K,
                        bool accumulate, Context& ctx);
bool gemm_supports(StorageType tc, StorageType ta, StorageType tb, Context& ctx);

// out[N,OC] = inp[N,C]·weight[C,OC] + bias[OC] (bias may be null). out is overwritten.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                    int OC, Context& ctx);

// dinp[N,C] += dout·weight^T ; dweight[C,OC] += inp^T·dout ; dbias[OC] += column sums of dout.
// Gradients are accumulated (+=) so micro-batches and shared weights add up; dbias may be null.
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC, Context& ctx);

}  // namespace mptrain::cpu
