// Matrix products for the CPU backend (oneDNN matmul; primitives cached by shape).
//
// gemm: C[M,N] = op(A)·op(B) (+ C when accumulate), row-major, fp32.
//   op(A) = A   stored [M,K]   (trans_a == false)   or A^T with A stored [K,M]
//   op(B) = B   stored [K,N]   (trans_b == false)   or B^T with B stored [N,K]
// matmul_forward/backward are the linear layer built on it, with weights in
// Hugging Face's Conv1D layout [C, OC]: out = inp·weight + bias.
#pragma once
#include <cstddef>

namespace mptrain::cpu {

class Context;

void gemm(float* c, const float* a, const float* b, int M, int N, int K, bool trans_a, bool trans_b,
          bool accumulate, Context& ctx);

// out[N,OC] = inp[N,C]·weight[C,OC] + bias[OC] (bias may be null). out is overwritten.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                    int OC, Context& ctx);

// dinp[N,C] += dout·weight^T ; dweight[C,OC] += inp^T·dout ; dbias[OC] += column sums of dout.
// Gradients are accumulated (+=) so micro-batches and shared weights add up; dbias may be null.
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC, Context& ctx);

}  // namespace mptrain::cpu
