// LayerNorm on the GPU (fp32 statistics): backend/ops/layernorm.h's contract for a storage type
// T. Device pointers; asynchronous.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// Rows in groups (QK-norm's heads inside qkv; backend.h's NormRows): row n starts at
// (n / groups)·stride + (n % groups)·C in every [N, C] tensor of the call; the defaults are
// contiguous rows. accumulate = false (backward) writes dinp (=), which may then be dout.
struct NormLayout {
  long long groups = 1, stride = 0;  // stride 0: groups·C
  bool accumulate = true;
};

// out[N,C] (=) = (inp - mean)·rstd·weight + bias; saves mean[N], rstd[N] (=, fp32). rms
// (RMSNorm): out = inp·rstd·weight, rstd = 1/sqrt(mean(inp²) + eps); mean and bias unused (null).
template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N,
                       int C, float eps, bool rms, Context& ctx, const NormLayout& rows = {});

// Floats of device scratch layernorm_backward needs (per-chunk partial sums of dweight/dbias).
size_t layernorm_backward_scratch_floats(int N, int C);

// dinp[N,C] += ..., dweight[C] += ..., dbias[C] += ...  (all accumulated, +=). dweight and
// dbias are deterministic: fixed row chunks, summed in chunk order. C <= 6016 (shared memory).
// rms: RMSNorm's backward (no mean term); mean and dbias unused (null).
template <class T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, float* scratch, int N, int C, bool rms,
                        Context& ctx, const NormLayout& rows = {});

}  // namespace mptrain::cuda
