// Sophia-G's elementwise kernels on the GPU (src/optim/sophia.h's semantics, the authors'
// reference order of operations), on fp32 master buffers laid out by the parameter table:
//   sophia_update:          p ← p·(1 − lr·wd_i);  m ← β1·m + (1−β1)·g;
//                           p ← p − lr·sign(m)·min(|m| / (ρ·b·h + 1e-15), 1)     (sign(0) = 0)
//   sophia_hessian_update:  h ← β2·h + (1−β2)·ĝ²
//   sophia_unclipped_count: #{i : |m_i| < ρ·b·h_i}  (the "win rate" numerator)
// wd_i comes from the same decay bit mask as cuda::adamw_update (decay_mask_bits), so one
// launch covers every parameter. Device pointers; asynchronous on ctx.stream().
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cuda/context.h"
#include "core/dtype.h"

namespace mptrain::cuda {

struct SophiaArgs {
  float lr = 0.0f;
  float beta1 = 0.965f;
  float rho_b = 0.0f;                 // ρ·b (b = tokens per optimizer step), as cpu sophia_update's
  float weight_decay = 0.1f;          // applied where the decay mask's bit is set
  float grad_scale = 1.0f;            // multiplies every gradient (the clip factor)
};

// params, m (=, updated in place); h read only. decay_mask: decay_mask_bits(n, decayed ranges).
// params, grads, m and h must be 16-byte aligned (one allocation per role is).
void sophia_update(float* params, const float* grads, float* m, const float* h, const uint32_t* decay_mask,
                   size_t n, const SophiaArgs& args, Context& ctx);

// h (=, in place) ← β2·h + (1−β2)·ĝ². h and ghat must be 16-byte aligned.
void sophia_hessian_update(float* h, const float* ghat, size_t n, float beta2, Context& ctx);

// count (device, one value) = the number of i < n with |m_i| < rho_b·h_i. Integer atomics only:
// exact and deterministic. Any alignment.
void sophia_unclipped_count(unsigned long long* count, const float* m, const float* h, size_t n, float rho_b,
                            Context& ctx);

}  // namespace mptrain::cuda
