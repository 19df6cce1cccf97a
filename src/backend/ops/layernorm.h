// LayerNorm over the last dimension (fp32 statistics).
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace mptrain::cpu {

// out[N,C] = (inp - mean) * rstd * weight + bias, written in dtype `to` (rounded once from the
// fp32 result: the input of a low-precision GEMM is written directly in its dtype); saves the
// fp32 mean[N] and rstd[N] for backward. rms (RMSNorm): out = inp * rstd * weight with
// rstd = 1/sqrt(mean(inp²) + eps); mean and bias are not used (may be null).
// Rows in groups (QK-norm's heads, backend.h's NormRows): row r starts at (r / groups)·stride +
// (r % groups)·C in inp, out, dinp and dout alike; groups = 1 and stride = C: contiguous rows.
void layernorm_forward_typed(void* out, StorageType to, float* mean, float* rstd, const float* inp,
                             const float* weight, const float* bias, int N, int C, float eps,
                             bool rms = false, std::int64_t groups = 1, std::int64_t stride = 0);

// dinp[N,C] += ..., dweight[C] += ..., dbias[C] += ...  (all accumulated, +=). rms: RMSNorm's
// backward (no mean term; mean and dbias not used). accumulate = false writes dinp (=); it may
// then be dout itself.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C,
                        bool rms = false, std::int64_t groups = 1, std::int64_t stride = 0,
                        bool accumulate = true);

}  // namespace mptrain::cpu
