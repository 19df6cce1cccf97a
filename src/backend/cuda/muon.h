// Muon's elementwise kernels on the GPU (backend/ops/optimizer.h's cpu::muon_momentum and
// cpu::muon_update, the same arithmetic), over one [rows, cols] matrix whose rows lie ld elements
// apart in m, grads and params (a column block of GPT-2's c_attn when ld > cols); u and o dense.
// The orthogonalisation between them is optim/muon.cpp's, over the backend's matmul (cuBLASLt).
// Device pointers; asynchronous on ctx.stream().
#pragma once
#include <cstdint>

#include "backend/cuda/context.h"
#include "core/dtype.h"

namespace mptrain::cuda {

// m ← mu·m + g;  u = nesterov ? g + mu·m : m;  g = grads·grad_scale.
void muon_momentum(float* m, const float* grads, float* u, int64_t rows, int64_t cols, int64_t ld, float mu,
                   bool nesterov, float grad_scale, Context& ctx);

// p ← p·(1 − lr·wd) − lr·scale·o, the two factors formed in double and rounded once (as the CPU).
// T: o's storage (float, Bf16, Fp16).
template <class T>
void muon_update(float* params, const T* o, int64_t rows, int64_t cols, int64_t ld, float lr,
                 float weight_decay, float scale, Context& ctx);

}  // namespace mptrain::cuda
