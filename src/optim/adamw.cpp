// AdamW update, one pass over the buffers (elementwise, so any thread split gives
// the same bits).
#include "optim/adamw.h"

#include <cmath>

namespace mptrain {

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t t) {
  // Bias corrections in double, as PyTorch computes them on the host in Python floats.
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t));
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = 1.0f - lr * weight_decay;
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    params[i] = params[i] * decay - step_size * mi / denom;
  }
}

AdamW::AdamW(const ParamTable& table, const AdamWHyper& hyper)
    : Optimizer(table, {"exp_avg", "exp_avg_sq"}), hyper_(hyper) {}

void AdamW::step(float* params, const float* grads, float lr, int64_t t) {
  for (const auto& spec : table_.specs()) {
    const size_t o = spec.offset;
    adamw_update(params + o, grads + o, m().data() + o, v().data() + o, spec.numel, lr, hyper_.beta1, hyper_.beta2,
                 hyper_.eps, spec.decay ? hyper_.weight_decay : 0.0f, t);
  }
}

}  // namespace mptrain
