// The sum of squares behind the global gradient norm (the Backend's sum_squares), deterministic:
// a fixed grid of partial sums in double, then one block adds the partials in a fixed order.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// Doubles of device scratch sum_squares needs.
size_t sum_squares_scratch_doubles();

// sum (=, device double) = Σ x[i]², summed in double.
void sum_squares(double* sum, const float* x, size_t n, double* scratch, Context& ctx);

}  // namespace mptrain::cuda
