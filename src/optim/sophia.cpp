// Sophia-G over a parameter table: the per-tensor rules (decay, real coordinates) and the
// schedule of estimates over the backend's sophia ops (CPU kernels: backend/cpu/optimizer.cpp).
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

Sophia::Sophia(const ParamTable& table, const SophiaHyper& hyper, double tokens_per_step, uint64_t seed,
               Backend& be)
    : Optimizer(table, {"exp_avg", "hessian"}, be),
      hyper_(hyper),
      tokens_per_step_(tokens_per_step),
      seed_(seed) {
  validate(hyper_);
  MPT_CHECK(tokens_per_step > 0.0, "[sophia] tokens per step must be positive, got " + std::to_string(tokens_per_step));
}

float Sophia::rho_b() const { return static_cast<float>(static_cast<double>(hyper_.rho) * tokens_per_step_); }

void Sophia::step(float* params, const float* grads, float lr, int64_t t, float grad_scale) {
  (void)t;  // Sophia has no bias correction; the schedule of estimates is curvature_due()'s
  if (table_.total() == 0) return;
  be_.sophia({.params = whole(params),
              .grads = whole(grads),
              .m = whole(m().data()),
              .h = whole(h().data()),
              .lr = lr,
              .beta1 = hyper_.beta1,
              .rho_b = rho_b(),
              .weight_decay = hyper_.weight_decay,
              .grad_scale = grad_scale,
              .decay_mask = decay_mask()});
}

double Sophia::update_curvature(const float* grads) {
  const auto all = static_cast<std::int64_t>(h().size());
  be_.sophia_hessian(View::f32(h().data(), {all}), View::f32(grads, {all}), hyper_.beta2);
  ++hessian_updates_;
  return win_rate();
}

double Sophia::win_rate() {
  std::int64_t unclipped = 0, total = 0;
  for (const auto& spec : table_.specs()) {
    // Only the real coordinates: padded wte rows (m = h = 0) are never updated at all.
    const size_t n = spec.hf_numel();
    unclipped += be_.count_unclipped(flat(m().data(), spec, n), flat(h().data(), spec, n), rho_b());
    total += static_cast<std::int64_t>(n);
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
