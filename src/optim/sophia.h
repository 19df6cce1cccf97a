// Sophia-G (Liu et al. 2023, "Sophia: A Scalable Stochastic Second-order Optimizer"),
// as the authors' reference code defines it (sophia.py's SophiaG, train_sophiag.py):
//
//   every step t:   p ← p·(1 − lr·wd)                      (decoupled; 2-D weights only)
//                   m ← β1·m + (1−β1)·g                    (no bias correction)
//                   p ← p − lr·sign(m)·min(|m| / (ρ·b·h + 1e-15), 1)
//   after step t when t % k == 0 (the authors' iter_num % k == k−1, 0-based):
//                   ĝ = gradient of the mean cross-entropy on labels ŷ ~ softmax(model's logits),
//                       clipped to the training gradient's global-norm bound
//                   h ← β2·h + (1−β2)·ĝ⊙ĝ                 (Gauss-Newton-Bartlett estimate)
//
// b is the number of tokens per optimizer step. Until the first estimate h = 0, so each
// update is lr·sign(m) (sign(0) = 0: padded wte rows, whose gradient is 0, stay put).
// The "win rate" is the fraction of coordinates with |m| < ρ·b·h, i.e. whose update is
// not clipped to ±lr; the authors advise keeping it between 0.1 and 0.5.
#pragma once
#include <cstddef>
#include <cstdint>

#include "optim/optimizer.h"

namespace mptrain {

struct SophiaHyper {
  float beta1 = 0.965f;
  float beta2 = 0.99f;
  float rho = 0.04f;
  float weight_decay = 0.1f;
  int64_t k = 10;  // steps between Hessian estimates
};

// Throws Error naming the offending flag (--sophia-rho, --sophia-k, --beta1, --beta2,
// --weight-decay) when a value is out of range.
void validate(const SophiaHyper& hyper);

// Sophia-G over every tensor of a parameter table. State: momentum m ("exp_avg") and the
// Hessian EMA h ("hessian"), one allocation each; scalar state: the number of Hessian
// estimates so far, which is also the counter of the label-sampling RNG.
class Sophia : public Optimizer {
 public:
  // tokens_per_step: b in ρ·b·h. seed: the label-sampling RNG's seed (the run's seed).
  Sophia(const ParamTable& table, const SophiaHyper& hyper, double tokens_per_step, uint64_t seed,
         Backend& be);

  OptimizerKind kind() const override { return OptimizerKind::Sophia; }
  using Optimizer::step;
  void step(float* params, const float* grads, float lr, int64_t t, float grad_scale) override;

  std::map<std::string, std::string> scalar_state() const override;
  void set_scalar_state(const std::map<std::string, std::string>& values) override;

  bool curvature_due(int64_t t) const override { return t % hyper_.k == 0; }
  uint64_t curvature_seed() const override { return seed_; }
  uint64_t curvature_counter() const override { return hessian_updates_; }
  double update_curvature(const float* grads) override;

  // Fraction of real coordinates (padded rows excluded) with |m| < ρ·b·h, for the current m, h.
  double win_rate();

  FloatBuffer& m() { return state_[0].buffer; }
  FloatBuffer& h() { return state_[1].buffer; }
  const FloatBuffer& m() const { return state_[0].buffer; }
  const FloatBuffer& h() const { return state_[1].buffer; }
  const SophiaHyper& hyper() const { return hyper_; }
  double tokens_per_step() const { return tokens_per_step_; }
  uint64_t hessian_updates() const { return hessian_updates_; }

 private:
  float rho_b() const;

  SophiaHyper hyper_;
  double tokens_per_step_;
  uint64_t seed_;
  uint64_t hessian_updates_ = 0;
};

}  // namespace mptrain
