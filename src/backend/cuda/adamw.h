// Fused AdamW over every parameter in one launch (src/optim/adamw.h's semantics, PyTorch's):
//   g = grads[i]·grad_scale;  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²
//   p = p·(1 - lr·wd_i) - (lr/(1-β1^t))·m / (sqrt(v)/sqrt(1-β2^t) + eps)
// on fp32 master parameters, gradients and moments (flat buffers laid out by the parameter
// table). wd_i is weight_decay where bit i of decay_mask is set, else 0 (biases, LayerNorm):
// the mask replaces per-tensor launches (its layout: backend.h's decay_mask_bits). Device
// pointers; asynchronous.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/context.h"
#include "core/dtype.h"

namespace mptrain::cuda {

struct AdamWArgs {
  float lr = 0.0f;
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  int64_t t = 1;                      // 1-based optimizer step (bias correction)
  float grad_scale = 1.0f;            // multiplies every gradient (the clip factor)
};

// params, m, v (=, updated in place). Any range of float buffers: 16-byte accesses from the first
// 16-byte boundary on (one allocation per role, the same range in each), single floats before it.
void adamw_update(float* params, const float* grads, float* m, float* v, const uint32_t* decay_mask, size_t n,
                  const AdamWArgs& args, Context& ctx);

}  // namespace mptrain::cuda
