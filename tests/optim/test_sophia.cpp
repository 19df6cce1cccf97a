// Sophia-G unit tests: the update against a double-precision transcription of the authors'
// formula; the clip bound |Δp| <= lr (after decay) for every coordinate, including h = 0,
// tiny h and huge gradients; with h = 0 the update is exactly lr·sign(m); weight decay only
// on 2-D weights; the Hessian EMA, win rate and estimate schedule; hyperparameter checks;
// and the optimizer state through a checkpoint (exact, and refused by the other optimizer).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/ops/optimizer.h"
#include "common/cpu_fp32.h"
#include "common/host_backend.h"
#include "common/test_util.h"
#include "core/error.h"
#include "core/rng.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"
#include "model/gpt2.h"
#include "optim/adamw.h"
#include "optim/make_optimizer.h"
#include "optim/sophia.h"
#include "train/checkpoint.h"

namespace mptrain {
namespace {

// Random m, h, g with a mix of magnitudes: h = 0 on every 7th coordinate, tiny elsewhere on
// every 5th, so that some coordinates are clipped and others are not.
struct State {
  std::vector<float> p, g, m, h;
};
State random_state(size_t n, uint64_t seed) {
  State s;
  s.p.resize(n), s.g.resize(n), s.m.resize(n), s.h.resize(n);
  for (size_t i = 0; i < n; ++i) {
    s.p[i] = normal01(seed, 0, i);
    s.g[i] = 1e-2f * normal01(seed, 1, i) * (i % 11 == 0 ? 1e4f : 1.0f);
    s.m[i] = 1e-2f * normal01(seed, 2, i);
    s.h[i] = i % 7 == 0 ? 0.0f : (i % 5 == 0 ? 1e-12f : 1e-3f * std::fabs(normal01(seed, 3, i)));
  }
  return s;
}

TEST(Sophia, UpdateMatchesTheAuthorsFormulaInDouble) {
  const size_t n = 1037;
  State s = random_state(n, 1);
  std::vector<double> p(s.p.begin(), s.p.end()), m(s.m.begin(), s.m.end());
  const float lr = 3e-3f, beta1 = 0.965f, rho_b = 0.04f * 512, wd = 0.1f;
  size_t clipped = 0, unclipped = 0;
  for (int t = 0; t < 4; ++t) {
    for (size_t i = 0; i < n; ++i) s.g[i] = 1e-2f * normal01(10 + t, 1, i);
    cpu::sophia_update(s.p.data(), s.g.data(), s.m.data(), s.h.data(), n, lr, beta1, rho_b, wd);
    for (size_t i = 0; i < n; ++i) {
      p[i] *= 1.0 - double(lr) * wd;
      m[i] = beta1 * m[i] + (1.0 - beta1) * s.g[i];
      const double ratio = std::min(std::fabs(m[i]) / (double(rho_b) * s.h[i] + 1e-15), 1.0);
      (ratio < 1.0 ? unclipped : clipped)++;
      p[i] -= lr * (m[i] > 0 ? 1.0 : m[i] < 0 ? -1.0 : 0.0) * ratio;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(s.m[i], m[i], 1e-6 * std::fabs(m[i]) + 1e-9) << i;  // fp32 cancellation: abs term
    ASSERT_NEAR(s.p[i], p[i], 1e-6 * std::fabs(p[i]) + 1e-9) << i;
  }
  EXPECT_GT(clipped, n / 10);  // both branches exercised
  EXPECT_GT(unclipped, n / 10);
}

TEST(Sophia, ClipBoundHoldsForEveryCoordinate) {
  const size_t n = 4099;
  State s = random_state(n, 2);
  const float lr = 1e-2f, wd = 0.2f, rho_b = 0.05f * 4096;
  const std::vector<float> before = s.p;
  cpu::sophia_update(s.p.data(), s.g.data(), s.m.data(), s.h.data(), n, lr, 0.965f, rho_b, wd);
  const float decay = static_cast<float>(1.0 - double(lr) * wd);
  for (size_t i = 0; i < n; ++i) {
    const float step = s.p[i] - before[i] * decay;
    ASSERT_TRUE(std::isfinite(s.p[i])) << i;
    ASSERT_LE(std::fabs(step), lr * (1.0f + 1e-6f) + 1e-6f * std::fabs(before[i])) << i;
    // Direction: against the momentum, never with it (where the step is above fp noise).
    if (std::fabs(step) > 1e-6f * std::fabs(before[i])) {
      ASSERT_LE(step * s.m[i], 0.0f) << i;
    }
  }
}

TEST(Sophia, WithZeroHessianTheUpdateIsLrTimesSignOfM) {
  const size_t n = 515;
  State s = random_state(n, 3);
  std::fill(s.h.begin(), s.h.end(), 0.0f);
  for (size_t i = 0; i < n; i += 9) s.g[i] = s.m[i] = 0.0f;  // sign(0) = 0: no move
  const std::vector<float> before = s.p;
  const float lr = 5e-3f;
  cpu::sophia_update(s.p.data(), s.g.data(), s.m.data(), s.h.data(), n, lr, 0.965f, 0.04f * 1000, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    const float sign = s.m[i] > 0 ? 1.0f : (s.m[i] < 0 ? -1.0f : 0.0f);
    ASSERT_EQ(s.p[i], before[i] - lr * sign) << i;  // exact: ratio is exactly 1 (or m = 0)
  }
}

Gpt2Config tiny_config() {
  Gpt2Config c;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_embd = 16;
  c.vocab_size = 37;
  c.padded_vocab_size = pad_vocab(37, 16);
  c.block_size = 8;
  return c;
}

TEST(Sophia, WeightDecayOnlyOnTwoDimensionalWeights) {
  const ParamTable table = gpt2_param_table(tiny_config());
  Sophia opt(table, SophiaHyper{0.965f, 0.99f, 0.04f, 0.5f, 10}, 64, 1, host_backend());
  std::vector<float> params(table.total(), 1.0f), grads(table.total(), 0.0f);
  opt.step(params.data(), grads.data(), 0.1f, 1);  // zero gradient and momentum: decay only
  const float decayed = static_cast<float>(1.0 - 0.1 * 0.5);
  for (const auto& spec : table.specs()) {
    EXPECT_EQ(spec.decay, spec.shape.size() == 2) << spec.name;  // the table's rule: 2-D weights
    for (size_t i = 0; i < spec.numel; ++i)
      ASSERT_EQ(params[spec.offset + i], spec.decay ? decayed : 1.0f) << spec.name << "[" << i << "]";
  }
}

// train/step.cpp hands clipping's factor to the update (Optimizer::step's grad_scale) instead of
// scaling the gradients first: the same bits, for both optimizers, clipping or not.
TEST(OptimizerGradScale, FactorInTheUpdateEqualsClippingFirst) {
  const ParamTable table = gpt2_param_table(tiny_config());
  const size_t n = table.total();
  for (const bool sophia : {false, true}) {
    for (const float max_norm : {0.05f, 1e9f}) {  // clips, and does not (factor 1)
      std::unique_ptr<Optimizer> first, fused;
      for (auto* o : {&first, &fused}) {
        if (sophia)
          *o = std::make_unique<Sophia>(table, SophiaHyper{0.965f, 0.99f, 0.04f, 0.1f, 2}, 64, 1,
                                        host_backend());
        else
          *o = std::make_unique<AdamW>(table, AdamWHyper{}, host_backend());
      }
      std::vector<float> p1(n), p2(n);
      for (size_t i = 0; i < n; ++i) p1[i] = p2[i] = 0.02f * normal01(21, 0, i);
      for (int t = 1; t <= 3; ++t) {
        std::vector<float> g(n);
        for (size_t i = 0; i < n; ++i) g[i] = 0.01f * normal01(22, t, i);
        const double norm = global_norm(g.data(), n);
        std::vector<float> clipped = g;
        clip_grad_norm(clipped.data(), n, norm, max_norm);
        first->step(p1.data(), clipped.data(), 1e-3f, t);
        fused->step(p2.data(), g.data(), 1e-3f, t, clip_coefficient(norm, max_norm));
        if (sophia && t == 2) {  // a Hessian estimate in between, the same for both
          first->update_curvature(g.data());
          fused->update_curvature(g.data());
        }
      }
      const std::string what = std::string(sophia ? "sophia" : "adamw") + (max_norm < 1.0f ? " clipping" : "");
      EXPECT_EQ(std::memcmp(p1.data(), p2.data(), n * sizeof(float)), 0) << what;
      for (size_t k = 0; k < first->state().size(); ++k)
        EXPECT_EQ(std::memcmp(first->state()[k].buffer.data(), fused->state()[k].buffer.data(), n * sizeof(float)), 0)
            << what << " " << first->state()[k].prefix;
    }
  }
}

TEST(Sophia, HessianEmaWinRateAndSchedule) {
  ParamTable table;
  table.add("w", {4, 2}, InitRule::Normal, true);
  table.add("b", {2}, InitRule::Zeros, false);
  const SophiaHyper hyper{0.9f, 0.75f, 0.5f, 0.0f, 3};
  Sophia opt(table, hyper, /*tokens_per_step=*/4, /*seed=*/77, host_backend());
  EXPECT_FALSE(opt.curvature_due(1));
  EXPECT_FALSE(opt.curvature_due(2));
  EXPECT_TRUE(opt.curvature_due(3));
  EXPECT_TRUE(opt.curvature_due(6));
  EXPECT_EQ(opt.curvature_seed(), 77u);
  EXPECT_EQ(opt.curvature_counter(), 0u);
  std::vector<float> ghat(table.total());
  for (size_t i = 0; i < ghat.size(); ++i) ghat[i] = 0.5f * static_cast<float>(i);
  // m = 0.1·i/10 = 0.01·i; after the estimate h = 0.25·(0.5 i)² = 0.0625 i²; ρ·b·h = 0.125 i².
  for (size_t i = 0; i < ghat.size(); ++i) opt.m()[i] = 0.01f * static_cast<float>(i);
  const double win = opt.update_curvature(ghat.data());
  for (size_t i = 0; i < ghat.size(); ++i) ASSERT_FLOAT_EQ(opt.h()[i], 0.25f * ghat[i] * ghat[i]);
  // |m| < 0.125 i² ⇔ 0.01 i < 0.125 i² ⇔ i >= 1: 9 of 10 coordinates unclipped.
  EXPECT_DOUBLE_EQ(win, 0.9);
  EXPECT_EQ(opt.curvature_counter(), 1u);
  opt.update_curvature(ghat.data());
  EXPECT_EQ(opt.curvature_counter(), 2u);
  for (size_t i = 0; i < ghat.size(); ++i)
    ASSERT_FLOAT_EQ(opt.h()[i], 0.75f * 0.25f * ghat[i] * ghat[i] + 0.25f * ghat[i] * ghat[i]);
  // Scalar state round trip.
  Sophia other(table, hyper, 4, 77, host_backend());
  other.set_scalar_state(opt.scalar_state());
  EXPECT_EQ(other.curvature_counter(), 2u);
  EXPECT_THROW(other.set_scalar_state({{"hessian_updates", "x1"}}), Error);
}

TEST(Sophia, RejectsBadHyperparameters) {
  ParamTable table;
  table.add("w", {2, 2}, InitRule::Normal, true);
  auto message = [&](SophiaHyper h) {
    try {
      Sophia opt(table, h, 16, 1, host_backend());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  SophiaHyper h;
  h.k = 0;
  EXPECT_NE(message(h).find("--sophia-k"), std::string::npos) << message(h);
  h = {};
  h.k = -3;
  EXPECT_NE(message(h).find("--sophia-k"), std::string::npos) << message(h);
  h = {};
  h.rho = 0.0f;
  EXPECT_NE(message(h).find("--sophia-rho"), std::string::npos) << message(h);
  h = {};
  h.rho = -0.04f;
  EXPECT_NE(message(h).find("--sophia-rho"), std::string::npos) << message(h);
  h = {};
  h.beta2 = 1.0f;
  EXPECT_NE(message(h).find("--beta2"), std::string::npos) << message(h);
  EXPECT_EQ(message(SophiaHyper{}), "no error");
  EXPECT_EQ(parse_optimizer_kind("sophia"), OptimizerKind::Sophia);
  EXPECT_THROW(parse_optimizer_kind("lion"), Error);
}

TEST(Sophia, StateSurvivesACheckpointAndTheOtherOptimizerIsRefused) {
  const Gpt2Config cfg = tiny_config();
  cpu::Context ctx;
  Gpt2 model(cfg, cpu_backend(ctx));
  model.init_weights(3);
  auto opt = make_optimizer(OptimizerKind::Sophia, model.table(), AdamWHyper{}, SophiaHyper{}, 64, 5,
                            model.backend());
  auto& sophia = static_cast<Sophia&>(*opt);
  for (size_t i = 0; i < model.num_params(); ++i) {
    sophia.m()[i] = normal01(8, 0, i);
    sophia.h()[i] = std::fabs(normal01(8, 1, i));
  }
  sophia.update_curvature(model.grads().data());  // counter 1 (h decays: ĝ = 0)
  testing::TempDir tmp;
  TrainState state;
  state.step = 7;
  save_checkpoint(tmp.path(), model, *opt, state, 0);
  const std::string ckpt = resolve_checkpoint(tmp.path());
  EXPECT_EQ(SafetensorsFile(ckpt + "/optimizer.safetensors").metadata().at("optimizer"), "sophia");

  auto back = make_optimizer(OptimizerKind::Sophia, model.table(), AdamWHyper{}, SophiaHyper{}, 64, 5,
                             model.backend());
  load_checkpoint_optimizer(ckpt, model.table(), *back);
  for (size_t r = 0; r < 2; ++r)
    ASSERT_EQ(0, std::memcmp(back->state()[r].buffer.data(), opt->state()[r].buffer.data(),
                             model.num_params() * sizeof(float)))
        << back->state()[r].prefix;
  EXPECT_EQ(back->curvature_counter(), 1u);

  AdamW adamw(model.table(), AdamWHyper{}, model.backend());
  try {
    load_checkpoint_optimizer(ckpt, model.table(), adamw);
    FAIL() << "AdamW accepted Sophia's state";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds sophia optimizer state"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--optimizer sophia"), std::string::npos) << e.what();
  }
  // And the reverse: an AdamW checkpoint is AdamW's.
  testing::TempDir tmp2;
  save_checkpoint(tmp2.path(), model, adamw, state, 0);
  EXPECT_THROW(load_checkpoint_optimizer(resolve_checkpoint(tmp2.path()), model.table(), *back), Error);
  load_checkpoint_optimizer(resolve_checkpoint(tmp2.path()), model.table(), adamw);
}

}  // namespace
}  // namespace mptrain
