// GradScaler semantics: skip + halve on inf/NaN, double after 2000 clean steps, unscale
// before clipping; and through train_step: a skipped step leaves parameters and AdamW
// state bitwise unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/context.h"
#include "common/host_backend.h"
#include "model/gpt2.h"
#include "optim/sophia.h"
#include "precision/loss_scaler.h"
#include "train/step.h"

namespace mptrain {
namespace {

TEST(LossScaler, UnscaleMultipliesByInverseAndFindsNonFinite) {
  LossScaler s;  // 65536
  std::vector<float> g = {65536.0f, -131072.0f, 3.0f};
  EXPECT_FALSE(host_backend().unscale_and_check(View::f32(g.data(), {3}), s.inv_scale()));
  EXPECT_EQ(g[0], 1.0f);
  EXPECT_EQ(g[1], -2.0f);
  EXPECT_EQ(g[2], 3.0f / 65536.0f);
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> h(1000, 1.0f);
    h[777] = bad;
    EXPECT_TRUE(host_backend().unscale_and_check(View::f32(h.data(), {1000}), s.inv_scale()));
  }
}

TEST(LossScaler, BackoffOnInfAndGrowthAfterInterval) {
  LossScaler s;
  s.update(true);
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.skipped_steps(), 1);
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.growth_tracker(), 1999);
  s.update(false);  // the 2000th clean step in a row
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.growth_tracker(), 0);
  for (int i = 0; i < 1000; ++i) s.update(false);
  s.update(true);  // an overflow resets the counter
  EXPECT_EQ(s.growth_tracker(), 0);
  EXPECT_EQ(s.scale(), 32768.0f);
  LossScaler r;
  r.restore(s.scale(), 17, s.skipped_steps());  // resume restores the state exactly
  EXPECT_EQ(r.scale(), 32768.0f);
  EXPECT_EQ(r.growth_tracker(), 17);
  EXPECT_EQ(r.skipped_steps(), 2);
}

TEST(LossScaler, NeverGrowsToInfinity) {
  LossScaler s(LossScalerConfig{3e38f, 2.0f, 0.5f, 1});
  s.update(false);
  EXPECT_EQ(s.scale(), 3e38f);
}

Gpt2Config tiny() {
  Gpt2Config c;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_embd = 32;
  c.vocab_size = 60;
  c.padded_vocab_size = 64;
  c.block_size = 16;
  return c;
}

TEST(LossScaler, OverflowingStepIsSkippedWithStateUnchangedThenTrainingContinues) {
  cpu::Context ctx;
  Gpt2 model(tiny(), cpu_backend(ctx));
  model.init_weights(3);
  model.plan(2, 8);
  AdamW opt(model.table(), AdamWHyper{}, model.backend());
  std::vector<int> in(16), tg(16);
  auto batch = [](int* a, int* b) {
    for (int i = 0; i < 16; ++i) {
      a[i] = (i * 7) % 60;
      b[i] = (i * 11 + 3) % 60;
    }
  };
  // One clean step so the moments are non-zero.
  LossScaler scaler(LossScalerConfig{1024.0f, 2.0f, 0.5f, 2000});
  StepStats st = train_step(model, opt, batch, 2, 8, 1, 1e-3f, 1.0f, 1, in.data(), tg.data(), &scaler);
  ASSERT_FALSE(st.skipped);
  EXPECT_EQ(st.loss_scale, 1024.0f);
  // A NaN in one parameter makes the loss and gradients non-finite: the step must be skipped.
  scaler.restore(1024.0f, 5, 0);
  float& poisoned = model.params()[model.table().get("h.0.mlp.c_proj.bias").offset + 3];
  const float saved = poisoned;
  poisoned = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> p0(model.params().data(), model.params().data() + model.num_params());
  const std::vector<float> m0(opt.m().data(), opt.m().data() + model.num_params());
  const std::vector<float> v0(opt.v().data(), opt.v().data() + model.num_params());
  st = train_step(model, opt, batch, 2, 8, 1, 1e-3f, 1.0f, 2, in.data(), tg.data(), &scaler);
  EXPECT_TRUE(st.skipped);
  EXPECT_EQ(std::memcmp(p0.data(), model.params().data(), p0.size() * 4), 0);
  EXPECT_EQ(std::memcmp(m0.data(), opt.m().data(), m0.size() * 4), 0);
  EXPECT_EQ(std::memcmp(v0.data(), opt.v().data(), v0.size() * 4), 0);
  EXPECT_EQ(scaler.scale(), 512.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  // With a sane scale the next step updates again, and unscaling makes the update equal to
  // the unscaled run's (powers of two scale exactly).
  scaler.restore(4096.0f, 0, 1);
  poisoned = saved;
  Gpt2 ref(tiny(), cpu_backend(ctx));
  std::copy(model.params().data(), model.params().data() + model.num_params(), ref.params().data());
  ref.plan(2, 8);
  AdamW ref_opt(ref.table(), AdamWHyper{}, ref.backend());
  std::copy(m0.begin(), m0.end(), ref_opt.m().data());
  std::copy(v0.begin(), v0.end(), ref_opt.v().data());
  st = train_step(model, opt, batch, 2, 8, 1, 1e-3f, 1.0f, 2, in.data(), tg.data(), &scaler);
  const StepStats rs = train_step(ref, ref_opt, batch, 2, 8, 1, 1e-3f, 1.0f, 2, in.data(), tg.data());
  EXPECT_FALSE(st.skipped);
  EXPECT_NEAR(st.grad_norm, rs.grad_norm, 1e-6 * rs.grad_norm);
  for (size_t i = 0; i < model.num_params(); ++i)
    ASSERT_NEAR(model.params()[i], ref.params()[i], 1e-6f + 1e-5f * std::fabs(ref.params()[i])) << i;
}

// Sophia's curvature pass under a loss scaler: the sampled-label gradient is scaled and then
// unscaled with one and the same scale, even when this step's clean update has just grown the
// scale, so the estimate equals an unscaled run's (a power-of-two scale is exact in fp32).
TEST(LossScaler, CurvatureEstimateUnscalesWithTheScaleItWasScaledBy) {
  cpu::Context ctx;
  const auto run = [&](LossScaler* scaler) {
    Gpt2 model(tiny(), cpu_backend(ctx));
    model.init_weights(3);
    model.plan(2, 8);
    SophiaHyper hyper;
    hyper.k = 1;  // an estimate after every step
    Sophia opt(model.table(), hyper, 16.0, 7, model.backend());
    std::vector<int> in(16), tg(16);
    auto batch = [](int* a, int* b) {
      for (int i = 0; i < 16; ++i) {
        a[i] = (i * 7) % 60;
        b[i] = (i * 11 + 3) % 60;
      }
    };
    return train_step(model, opt, batch, 2, 8, 1, 1e-3f, 1.0f, 1, in.data(), tg.data(), scaler);
  };
  LossScaler grows(LossScalerConfig{1024.0f, 2.0f, 0.5f, 1});  // one clean step doubles the scale
  const StepStats scaled = run(&grows);
  ASSERT_EQ(grows.scale(), 2048.0f);
  const StepStats plain = run(nullptr);
  ASSERT_TRUE(scaled.curvature && plain.curvature);
  EXPECT_EQ(scaled.loss_scale, 1024.0f);
  EXPECT_NEAR(scaled.curvature_norm, plain.curvature_norm, 1e-6 * plain.curvature_norm);
  EXPECT_EQ(scaled.win_rate, plain.win_rate);
}

}  // namespace
}  // namespace mptrain
