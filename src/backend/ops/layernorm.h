// LayerNorm over the last dimension (fp32 statistics).
#pragma once
#include "core/dtype.h"

namespace mptrain::cpu {

// out[N,C] = (inp - mean) * rstd * weight + bias, written in dtype `to` (rounded once from the
// fp32 result: the input of a low-precision GEMM is written directly in its dtype); saves the
// fp32 mean[N] and rstd[N] for backward.
void layernorm_forward_typed(void* out, StorageType to, float* mean, float* rstd, const float* inp,
                             const float* weight, const float* bias, int N, int C, float eps);

// dinp[N,C] += ..., dweight[C] += ..., dbias[C] += ...  (all accumulated, +=).
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C);

}  // namespace mptrain::cpu
