// Deterministic global norm: blocks of a fixed size are reduced independently (in
// parallel), then the block sums are added in index order.
#include "optim/grad_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mptrain {

double global_norm(const float* grads, size_t n) {
  constexpr size_t kBlock = 1 << 16;
  const size_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks, 0.0);
#pragma omp parallel for schedule(static)
  for (size_t b = 0; b < blocks; ++b) {
    const size_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
    double s = 0.0;
    for (size_t i = lo; i < hi; ++i) s += static_cast<double>(grads[i]) * grads[i];
    partial[b] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return std::sqrt(total);
}

float clip_coefficient(double norm, float max_norm) {
  if (max_norm <= 0.0f) return 1.0f;
  const double coef = static_cast<double>(max_norm) / (norm + 1e-6);
  return coef >= 1.0 ? 1.0f : static_cast<float>(coef);
}

float clip_grad_norm(float* grads, size_t n, double norm, float max_norm) {
  const float c = clip_coefficient(norm, max_norm);
  if (c == 1.0f) return 1.0f;
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) grads[i] *= c;
  return c;
}

}  // namespace mptrain
