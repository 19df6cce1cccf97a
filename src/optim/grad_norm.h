// Global gradient norm and clipping with torch.nn.utils.clip_grad_norm_'s rule:
// coef = max_norm / (norm + 1e-6), applied only when coef < 1. The training step takes the norm
// through the backend's sum_squares and scale ops (train/step.cpp); global_norm and
// clip_grad_norm are the same kernels on host buffers, for references and benchmarks.
#pragma once
#include <cstddef>

namespace mptrain {

// sqrt(sum g²), accumulated in double over fixed-size blocks summed in order, so the
// result does not depend on the number of threads (the CPU backend's sum_squares).
double global_norm(const float* grads, size_t n);

// min(1, max_norm / (norm + 1e-6)), and 1 when max_norm <= 0: the factor clip_grad_norm
// applies (also the device optimizer's, so that its clipping is the CPU's to the bit).
float clip_coefficient(double norm, float max_norm);

// Scales grads by clip_coefficient(norm, max_norm); returns the factor applied.
float clip_grad_norm(float* grads, size_t n, double norm, float max_norm);

}  // namespace mptrain
