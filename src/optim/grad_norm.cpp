// The global norm and the clip factor.
#include "optim/grad_norm.h"

#include <cmath>

#include "backend/ops/optimizer.h"

namespace mptrain {

double global_norm(const float* grads, size_t n) { return std::sqrt(cpu::sum_of_squares(grads, n)); }

float clip_coefficient(double norm, float max_norm) {
  if (max_norm <= 0.0f) return 1.0f;
  const double coef = static_cast<double>(max_norm) / (norm + 1e-6);
  return coef >= 1.0 ? 1.0f : static_cast<float>(coef);
}

float clip_grad_norm(float* grads, size_t n, double norm, float max_norm) {
  const float c = clip_coefficient(norm, max_norm);
  if (c == 1.0f) return 1.0f;
  cpu::scale(grads, n, c);
  return c;
}

}  // namespace mptrain
