// Sophia-G on flat buffers. Each kernel is elementwise (or an integer count), so any
// thread split gives the same bits. The fp32 arithmetic follows the order of the
// authors' PyTorch code, so that a transcription of it agrees to fp32 rounding:
//   param.mul_(1 − lr·wd)                     (the factor rounded once to fp32)
//   exp_avg.mul_(β1).add_(grad, alpha=1−β1)
//   ratio = (|exp_avg| / (ρ·bs·hess + 1e-15)).clamp(max=1)
//   param.addcmul_(sign(exp_avg), ratio, value=−lr)
#include "optim/sophia.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace mptrain {

void validate(const SophiaHyper& h) {
  MPT_CHECK(h.k > 0, "--sophia-k (steps between Hessian estimates) must be positive, got " + std::to_string(h.k));
  MPT_CHECK(h.rho > 0.0f && std::isfinite(h.rho), "--sophia-rho must be positive, got " + std::to_string(h.rho));
  MPT_CHECK(h.beta1 >= 0.0f && h.beta1 < 1.0f, "--beta1 must be in [0, 1), got " + std::to_string(h.beta1));
  MPT_CHECK(h.beta2 >= 0.0f && h.beta2 < 1.0f, "--beta2 must be in [0, 1), got " + std::to_string(h.beta2));
  MPT_CHECK(h.weight_decay >= 0.0f && std::isfinite(h.weight_decay),
            "--weight-decay must be >= 0, got " + std::to_string(h.weight_decay));
}

void sophia_update(float* params, const float* grads, float* m, const float* h, size_t n, float lr, float beta1,
                   float rho_b, float weight_decay, float grad_scale) {
  // Host-side factors in double, rounded once, as PyTorch does with Python floats.
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  const float one_minus_beta1 = static_cast<float>(1.0 - static_cast<double>(beta1));
  const float neg_lr = -lr;
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float p = params[i] * decay;
    const float mi = m[i] * beta1 + one_minus_beta1 * (grads[i] * grad_scale);
    m[i] = mi;
    const float ratio = std::fmin(std::fabs(mi) / (rho_b * h[i] + 1e-15f), 1.0f);
    const float sign = mi > 0.0f ? 1.0f : (mi < 0.0f ? -1.0f : 0.0f);
    params[i] = p + neg_lr * sign * ratio;
  }
}

void sophia_hessian_update(float* h, const float* ghat, size_t n, float beta2) {
  const float one_minus_beta2 = static_cast<float>(1.0 - static_cast<double>(beta2));
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) h[i] = h[i] * beta2 + one_minus_beta2 * ghat[i] * ghat[i];
}

size_t sophia_unclipped_count(const float* m, const float* h, size_t n, float rho_b) {
  size_t count = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : count)
  for (size_t i = 0; i < n; ++i) count += std::fabs(m[i]) < rho_b * h[i] ? 1 : 0;
  return count;
}

Sophia::Sophia(const ParamTable& table, const SophiaHyper& hyper, double tokens_per_step, uint64_t seed)
    : Optimizer(table, {"exp_avg", "hessian"}), hyper_(hyper), tokens_per_step_(tokens_per_step), seed_(seed) {
  validate(hyper_);
  MPT_CHECK(tokens_per_step > 0.0, "[sophia] tokens per step must be positive, got " + std::to_string(tokens_per_step));
}

float Sophia::rho_b() const { return static_cast<float>(static_cast<double>(hyper_.rho) * tokens_per_step_); }

void Sophia::step(float* params, const float* grads, float lr, int64_t t, float grad_scale) {
  (void)t;  // Sophia has no bias correction; the schedule of estimates is curvature_due()'s
  const float rb = rho_b();
  for (const auto& spec : table_.specs()) {
    const size_t o = spec.offset;
    sophia_update(params + o, grads + o, m().data() + o, h().data() + o, spec.numel, lr, hyper_.beta1, rb,
                  spec.decay ? hyper_.weight_decay : 0.0f, grad_scale);
  }
}

double Sophia::update_curvature(const float* grads) {
  sophia_hessian_update(h().data(), grads, h().size(), hyper_.beta2);
  ++hessian_updates_;
  return win_rate();
}

double Sophia::win_rate() const {
  const float rb = rho_b();
  size_t unclipped = 0, total = 0;
  for (const auto& spec : table_.specs()) {
    // Only the real coordinates: padded wte rows (m = h = 0) are never updated at all.
    const size_t n = spec.hf_numel();
    unclipped += sophia_unclipped_count(m().data() + spec.offset, h().data() + spec.offset, n, rb);
    total += n;
  }
  return total ? static_cast<double>(unclipped) / static_cast<double>(total) : 0.0;
}

std::map<std::string, std::string> Sophia::scalar_state() const {
  return {{"hessian_updates", std::to_string(hessian_updates_)}};
}

void Sophia::set_scalar_state(const std::map<std::string, std::string>& values) {
  auto it = values.find("hessian_updates");
  if (it == values.end()) return;
  size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  MPT_CHECK(used == it->second.size() && used > 0,
            "[sophia] bad hessian_updates value '" + it->second + "' in the optimizer state");
  hessian_updates_ = v;
}

}  // namespace mptrain
