// nn.Linear layout on top of gemm(): forward C = A·W^T, backward dA += dC·W and dW += dC^T·A.
// Bias add and bias gradient as in cpu/gemm.cpp: fixed-order column sums, so dbias does not
// depend on the thread count.
#include "backend/ops/linear.h"

#include <algorithm>
#include <string>

#include "backend/ops/gemm.h"
#include "backend/ops/gemm_mixed.h"
#include "core/error.h"

namespace mptrain::cpu {

namespace {

std::string dims(int N, int C, int OC) {
  return "N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC);
}


}  // namespace

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC,
                    Context& ctx) {
  MPT_CHECK(N >= 0 && C >= 0 && OC >= 0, "[linear_forward] negative size: " + dims(N, C, OC));
  MPT_CHECK(out && inp && weight, "[linear_forward] null pointer: " + dims(N, C, OC));
  if (N == 0) return;
  gemm(out, inp, weight, N, OC, C, false, true, false, ctx);
  if (bias == nullptr) return;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    float* row = out + static_cast<size_t>(n) * OC;
    for (int o = 0; o < OC; ++o) row[o] += bias[o];
  }
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC, Context& ctx) {
  MPT_CHECK(N >= 0 && C >= 0 && OC >= 0, "[linear_backward] negative size: " + dims(N, C, OC));
  MPT_CHECK(dweight && dout && inp && weight, "[linear_backward] null pointer: " + dims(N, C, OC));
  if (N == 0) return;
  // dinp[N,C] += dout[N,OC]·weight[OC,C]
  if (dinp) gemm(dinp, dout, weight, N, C, OC, false, false, true, ctx);
  // dweight[OC,C] += dout[N,OC]^T·inp[N,C]
  gemm(dweight, dout, inp, OC, C, N, true, false, true, ctx);
  if (dbias == nullptr) return;
  bias_backward_typed(dbias, dout, StorageType::F32, N, OC);  // the one column-sum kernel
}

}  // namespace mptrain::cpu
