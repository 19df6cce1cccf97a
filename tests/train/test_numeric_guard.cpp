// Numeric guards at the C++ level:
//  - the first non-finite element is found in parameter-table order, within a range
//  - the step message and the refusal to save name the parameter (and optimizer state)
//  - rollback_target: stop, give up after the maximum, nothing to roll back to, the run's
//    latest checkpoint, or a damaged one (refused)
//  - train_step with a NaN injected into one parameter's gradient (fp32 and bf16): the step
//    reports non_finite, and weights and optimizer state are bit-for-bit unchanged
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "core/error.h"
#include "io/checkpoint_dir.h"
#include "io/fileutil.h"
#include "model/gpt2.h"
#include "optim/make_optimizer.h"
#include "train/numeric_guard.h"
#include "train/step.h"
#include "train/train_test_util.h"
#include "common/host_backend.h"

namespace mptrain {
namespace {

using testing::TempDir;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

ParamTable small_table() {
  ParamTable t;
  t.add("a", {4}, InitRule::Zeros, false);
  t.add("b", {2, 3}, InitRule::Zeros, true);
  t.add("c", {5}, InitRule::Zeros, false);
  return t;  // offsets 0, 4, 10; 15 elements
}

TEST(NumericGuard, FirstNonFiniteInTableOrderWithinARange) {
  const ParamTable t = small_table();
  std::vector<float> buf(t.total(), 1.0f);
  EXPECT_FALSE(first_non_finite(t, buf.data(), 0, t.total()));
  buf[12] = std::numeric_limits<float>::infinity();  // c[2]
  buf[5] = std::nanf("");                            // b[1]
  auto nf = first_non_finite(t, buf.data(), 0, t.total());
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->param, "b");
  EXPECT_EQ(nf->index, 1u);
  EXPECT_TRUE(std::isnan(nf->value));
  // A rank's range [6, 15) sees only the inf in c.
  nf = first_non_finite(t, buf.data(), 6, t.total());
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->param, "c");
  EXPECT_EQ(nf->index, 2u);
  EXPECT_FALSE(first_non_finite(t, buf.data(), 0, 5));

  const std::string msg = non_finite_step_message(7, 3.5f, std::nan(""), t, buf.data(), 0, t.total());
  EXPECT_NE(msg.find("non-finite gradient at step 7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("first non-finite gradient: b (element 1 = nan)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the weights were not updated"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(NumericGuard, RefusesToSaveNonFiniteParametersOrOptimizerState) {
  const ParamTable t = small_table();
  std::vector<float> params(t.total(), 0.5f), m(t.total(), 0.0f), v(t.total(), 0.0f);
  check_finite_before_save("step_00000003", t, params.data(), {{"exp_avg", m.data()}, {"exp_avg_sq", v.data()}});
  v[14] = -std::numeric_limits<float>::infinity();
  EXPECT_NE(error_of([&] {
              check_finite_before_save("step_00000003", t, params.data(), {{"exp_avg", m.data()}, {"exp_avg_sq", v.data()}});
            }).find("refusing to save checkpoint step_00000003: optimizer state exp_avg_sq.c (element 4 = -inf)"),
            std::string::npos);
  params[0] = std::nanf("");
  EXPECT_NE(error_of([&] { check_finite_before_save("step_00000003", t, params.data(), {}); })
                .find("refusing to save checkpoint step_00000003: parameter a (element 0 = nan) is not finite"),
            std::string::npos);
}

TEST(NumericGuard, RollbackTarget) {
  TempDir tmp;
  const std::string run = tmp / "run";
  NanGuardOptions o;
  EXPECT_EQ(parse_nan_policy("stop"), NanPolicy::Stop);
  EXPECT_EQ(parse_nan_policy("rollback"), NanPolicy::Rollback);
  EXPECT_NE(error_of([] { parse_nan_policy("ignore"); }).find("expected stop or rollback"), std::string::npos);
  EXPECT_NE(error_of([&] { rollback_target(o, "bad step", run, "", 0); }).find("bad step; stopping"),
            std::string::npos);
  o.policy = NanPolicy::Rollback;
  EXPECT_NE(error_of([&] { rollback_target(o, "bad step", run, "", 0); }).find("no checkpoint to roll back to"),
            std::string::npos);
  EXPECT_NE(error_of([&] { rollback_target(o, "bad step", run, "", 3); }).find("giving up after 3 rollback(s)"),
            std::string::npos);
  // A run checkpoint (the minimal kind io/checkpoint_dir.h recognises).
  const std::string dir = begin_checkpoint(run, 4);
  write_file_atomic(dir + "/" + kCheckpointModelFile, std::string("x"));
  commit_checkpoint(run, 4);
  EXPECT_EQ(rollback_target(o, "bad step", run, "", 2), run + "/" + checkpoint_name(4));
  // A damaged checkpoint is not rolled back to.
  write_file_atomic(run + "/" + checkpoint_name(4) + "/" + kCheckpointModelFile, std::string("y"));
  EXPECT_NE(error_of([&] { rollback_target(o, "bad step", run, "", 2); })
                .find("bad step; cannot roll back: checksum mismatch in model.safetensors"),
            std::string::npos);
  o.lr_factor = 1.0f;
  EXPECT_NE(error_of([&] { validate(o); }).find("--nan-lr-factor must be in (0, 1)"), std::string::npos);
}

// A d2-sized model and one train_step with a NaN injected into `param`'s gradient.
void expect_step_leaves_weights_unchanged(Precision precision, const std::string& param) {
  Gpt2Config config = gpt2_preset("d2", 64);
  config.vocab_size = 200;
  config.padded_vocab_size = 256;
  config.block_size = 32;
  cpu::Context ctx;
  Gpt2 model(config, cpu_backend(ctx), precision);
  model.init_weights(3);
  const int B = 2, T = 16;
  model.plan(B, T);
  auto optimizer = make_optimizer(OptimizerKind::AdamW, model.table(), AdamWHyper{}, SophiaHyper{}, B * T, 1,
                                  model.backend());
  std::vector<int> inputs(B * T), targets(B * T);
  int counter = 0;
  const NextBatchFn next = [&](int* in, int* tg) {
    for (int i = 0; i < B * T; ++i) {
      in[i] = (counter + i * 7) % config.vocab_size;
      tg[i] = (counter + i * 7 + 1) % config.vocab_size;
    }
    ++counter;
  };
  // A clean first step, so that the optimizer state is not all zeros.
  StepStats s1 = train_step(model, *optimizer, next, B, T, 1, 1e-3f, 1.0f, 1, inputs.data(), targets.data());
  ASSERT_FALSE(s1.non_finite);
  const std::vector<float> before(model.params().data(), model.params().data() + model.num_params());
  std::vector<std::vector<float>> state_before;
  for (const auto& st : optimizer->state()) state_before.emplace_back(st.buffer.data(), st.buffer.data() + st.buffer.size());

  ::setenv("MPTRAIN_TEST_INJECT_NAN", ("2:" + param).c_str(), 1);
  StepStats s2 = train_step(model, *optimizer, next, B, T, 1, 1e-3f, 1.0f, 2, inputs.data(), targets.data());
  ::unsetenv("MPTRAIN_TEST_INJECT_NAN");
  EXPECT_TRUE(s2.non_finite);
  EXPECT_FALSE(std::isfinite(s2.grad_norm));
  EXPECT_EQ(std::memcmp(before.data(), model.params().data(), before.size() * sizeof(float)), 0)
      << "the weights changed after a non-finite step";
  size_t i = 0;
  for (const auto& st : optimizer->state())
    EXPECT_EQ(std::memcmp(state_before[i++].data(), st.buffer.data(), st.buffer.size() * sizeof(float)), 0)
        << "optimizer state " << st.prefix << " changed";
  const auto nf = first_non_finite(model.table(), model.grads().data(), 0, model.num_params());
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->param, param);  // only the injected element is NaN, so it is the first
  // The next step runs clean and updates the weights.
  StepStats s3 = train_step(model, *optimizer, next, B, T, 1, 1e-3f, 1.0f, 2, inputs.data(), targets.data());
  EXPECT_FALSE(s3.non_finite);
  EXPECT_NE(std::memcmp(before.data(), model.params().data(), before.size() * sizeof(float)), 0);
}

TEST(NumericGuard, NonFiniteStepLeavesWeightsAndOptimizerStateUnchangedFp32) {
  expect_step_leaves_weights_unchanged(Precision::Fp32, "h.1.mlp.c_fc.weight");
}

TEST(NumericGuard, NonFiniteStepLeavesWeightsAndOptimizerStateUnchangedBf16) {
  expect_step_leaves_weights_unchanged(Precision::Bf16, "h.0.attn.c_attn.bias");
}

}  // namespace
}  // namespace mptrain
