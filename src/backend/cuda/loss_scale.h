// fp16 loss scaling on the GPU: precision/loss_scaler.h's unscale_and_check without a host
// sync per tensor. Device pointers; asynchronous.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// grads[i] (=) *= inv_scale (the caller's reciprocal of the scale, GradScaler's: formed in double,
// used as float — LossScaler::inv_scale — so the CPU's multiplier, whatever the scale).
// found_inf (device int) is SET to 1 when any grads[i] is inf or NaN, and never cleared here.
void unscale_and_check(float* grads, size_t n, float inv_scale, int* found_inf, Context& ctx);
// x[i] (=) *= factor: a clip factor applied on its own (Sophia's curvature estimate).
void scale_in_place(float* x, size_t n, float factor, Context& ctx);

}  // namespace mptrain::cuda
