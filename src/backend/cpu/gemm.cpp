// The linear layer (Conv1D layout, weight[C,OC]) on top of gemm(); gemm() itself is in
// context.cpp, the one file that includes oneDNN. Bias add and bias gradient are OpenMP loops:
// one pass over out[N,OC], a few percent of the GEMM's time at GPT-2 sizes.
#include "backend/ops/gemm.h"
#include "backend/ops/gemm_mixed.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace mptrain::cpu {

namespace {

std::string dims(int N, int C, int OC) {
  return "N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC);
}

// Columns per task of the bias-gradient reduction: 64 floats = one 256-byte strip (no false
// sharing between threads), summed over rows in order 0..N-1, so the result does not depend
// on the number of threads.

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                    int OC, Context& ctx) {
  MPT_CHECK(N >= 0 && C >= 0 && OC >= 0, "[matmul_forward] negative size: " + dims(N, C, OC));
  MPT_CHECK(out && inp && weight, "[matmul_forward] null pointer: " + dims(N, C, OC));
  gemm(out, inp, weight, N, OC, C, false, false, false, ctx);
  if (bias == nullptr) return;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    float* row = out + static_cast<size_t>(n) * OC;
    for (int o = 0; o < OC; ++o) row[o] += bias[o];
  }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC, Context& ctx) {
  MPT_CHECK(N >= 0 && C >= 0 && OC >= 0, "[matmul_backward] negative size: " + dims(N, C, OC));
  MPT_CHECK(dinp && dweight && dout && inp && weight, "[matmul_backward] null pointer: " + dims(N, C, OC));
  // dinp[N,C] += dout[N,OC]·weight[C,OC]^T
  gemm(dinp, dout, weight, N, C, OC, false, true, true, ctx);
  // dweight[C,OC] += inp[N,C]^T·dout[N,OC]
  gemm(dweight, inp, dout, C, OC, N, true, false, true, ctx);
  if (dbias == nullptr) return;
  bias_backward_typed(dbias, dout, StorageType::F32, N, OC);  // the one column-sum kernel
}

}  // namespace mptrain::cpu
