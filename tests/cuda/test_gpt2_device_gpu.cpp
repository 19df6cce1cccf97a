// End to end: GPT-2 trained on the GPU (cuda::Gpt2Device) against the CPU model (model/gpt2.h)
// with the CPU AdamW (optim/adamw.h) and clipping (optim/grad_norm.h), as train/step.cpp runs
// them: the same initial weights (Gpt2::init_weights), the same 20 batches, the same
// hyper-parameters. The CPU reference is fp32 in every case (the ground truth).
//
// Tolerances (relative): per-step loss fp32 1e-4 (two fp32 implementations that differ only in
// summation order), TF32 1e-2 (10-bit mantissa GEMM inputs), bf16/fp16 3e-2 (every activation,
// the residual stream and the logits stored in 16 bits, gradients rounded to 16 bits once; a
// wrongly wired tensor moves the loss by far more). Gradients after step 1, per tensor
// (relative norm error): fp32 1e-4, TF32 2e-2, fp16 5e-2, bf16 1e-1 (bf16's 8-bit mantissa on
// gradients summed over 128 tokens; a swapped or missing tensor gives an error near 1).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cuda/gpt2_device.h"
#include "cuda/gpu_test_util.h"
#include "model/gpt2.h"
#include "optim/adamw.h"
#include "optim/grad_norm.h"
#include "precision/precision.h"

namespace mptrain {
namespace {

constexpr int kB = 4, kT = 32, kSteps = 20;
constexpr float kLr = 1e-3f, kClip = 1.0f;

Gpt2Config small_config() {
  Gpt2Config c;
  c.block_size = 64;
  c.vocab_size = 300;
  c.padded_vocab_size = pad_vocab(300, 64);  // 320: 20 padded columns and wte rows
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 64;
  return c;
}

// Batch s: each row an arithmetic sequence (step 3 mod V) from a row- and step-dependent start,
// so the loss falls over the 20 steps and tokens repeat (encoder backward sums duplicates);
// one ignored target (-1) per batch exercises the valid-token count.
void make_batch(int s, std::vector<int>& tokens, std::vector<int>& targets) {
  const int V = small_config().vocab_size;
  tokens.resize(kB * kT);
  targets.resize(kB * kT);
  for (int b = 0; b < kB; ++b)
    for (int t = 0; t < kT; ++t) {
      const int start = (37 * (b + s * kB) + 11) % V;
      tokens[b * kT + t] = (start + 3 * t) % V;
      targets[b * kT + t] = (start + 3 * (t + 1)) % V;
    }
  targets[(s % kB) * kT + (s % kT)] = -1;
}

struct CpuRun {
  std::vector<float> init, grads1, final_params;
  std::vector<float> losses;
};

// The CPU reference, once per process.
const CpuRun& cpu_run() {
  static const CpuRun run = [] {
    CpuRun r;
    cpu::Context ctx;
    Gpt2 model(small_config(), ctx, Precision::Fp32);
    model.init_weights(1234);
    r.init.assign(model.params().data(), model.params().data() + model.num_params());
    model.plan(kB, kT);
    AdamW opt(model.table(), AdamWHyper{});
    std::vector<int> tokens, targets;
    const size_t n = model.num_params();
    for (int s = 0; s < kSteps; ++s) {
      make_batch(s, tokens, targets);
      model.zero_grad();
      r.losses.push_back(model.forward_backward(tokens.data(), targets.data(), kB, kT, 1.0f));
      float* g = model.grads().data();
      if (s == 0) r.grads1.assign(g, g + n);
      clip_grad_norm(g, n, global_norm(g, n), kClip);
      opt.step(model.params().data(), g, kLr, s + 1);
    }
    r.final_params.assign(model.params().data(), model.params().data() + model.num_params());
    return r;
  }();
  return run;
}

struct Tolerances {
  double loss, grad;
};
Tolerances tolerances(Precision p) {
  switch (p) {
    case Precision::Fp32:
      return {1e-4, 1e-4};
    case Precision::Tf32:
      return {1e-2, 2e-2};
    case Precision::Fp16:
      return {3e-2, 5e-2};
    case Precision::Bf16:
      return {3e-2, 1e-1};
  }
  return {0, 0};
}

class Gpt2DeviceTest : public ::testing::TestWithParam<Precision> {};

TEST_P(Gpt2DeviceTest, TwentyStepsMatchTheCpuModel) {
  SKIP_WITHOUT_GPU();
  const Precision p = GetParam();
  const Tolerances tol = tolerances(p);
  const CpuRun& ref = cpu_run();
  cuda::Gpt2Device dev(small_config(), p, kB, kT, gputest::ctx());
  ASSERT_EQ(dev.num_params(), ref.init.size());
  dev.upload_params(ref.init.data());
  std::vector<int> tokens, targets;
  for (int s = 0; s < kSteps; ++s) {
    make_batch(s, tokens, targets);
    const float loss = dev.forward_backward(tokens.data(), targets.data(), kB, kT);
    if (s == 0) {
      std::vector<float> g(dev.num_params());
      dev.download_grads(g.data());
      const float unscale = dev.loss_scaler() ? 1.0f / dev.loss_scaler()->scale() : 1.0f;
      for (float& x : g) x *= unscale;
      for (const ParamSpec& spec : dev.table().specs()) {
        const std::vector<float> got(g.begin() + spec.offset, g.begin() + spec.offset + spec.numel);
        const std::vector<float> want(ref.grads1.begin() + spec.offset,
                                      ref.grads1.begin() + spec.offset + spec.numel);
        EXPECT_LE(gputest::rel_err(got, want), tol.grad) << precision_name(p) << " gradient of " << spec.name;
      }
    }
    EXPECT_TRUE(std::isfinite(loss)) << "step " << s + 1;
    EXPECT_LE(std::fabs(loss - ref.losses[s]), tol.loss * std::fabs(ref.losses[s]))
        << precision_name(p) << " step " << s + 1 << ": GPU loss " << loss << ", CPU loss " << ref.losses[s];
    EXPECT_TRUE(dev.step(kLr, AdamWHyper{}, kClip, s + 1)) << "step " << s + 1 << " skipped by the loss scaler";
    EXPECT_TRUE(std::isfinite(dev.last_grad_norm())) << "step " << s + 1;
  }
  std::vector<float> params(dev.num_params());
  dev.download_params(params.data());
  size_t non_finite = 0;
  for (float x : params) non_finite += !std::isfinite(x);
  EXPECT_EQ(non_finite, 0u) << precision_name(p) << ": parameters with NaN/inf after " << kSteps << " steps";
  if (p == Precision::Fp32) {
    EXPECT_LE(gputest::rel_err(params, ref.final_params), 1e-4) << "fp32 parameters after " << kSteps << " steps";
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, Gpt2DeviceTest,
                         ::testing::Values(Precision::Fp32, Precision::Tf32, Precision::Bf16, Precision::Fp16),
                         [](const ::testing::TestParamInfo<Precision>& info) {
                           return std::string(precision_name(info.param));
                         });

// The CPU reference itself (runs without a GPU): finite losses that fall over the 20 steps (the
// batches are learnable), so that matching it step by step is a real check of training.
TEST(Gpt2DeviceReference, CpuLossFallsOverTheTwentySteps) {
  const CpuRun& ref = cpu_run();
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps));
  for (float l : ref.losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_NEAR(ref.losses.front(), std::log(300.0f), 0.3f);  // near-uniform predictions at init
  EXPECT_LT(ref.losses.back(), ref.losses.front() - 0.1f);
}

// Sizes the device model refuses before allocating anything.
TEST(Gpt2Device, RefusesASequenceLongerThanTheContextAndAnUnplannedBatch) {
  SKIP_WITHOUT_GPU();
  EXPECT_THROW(cuda::Gpt2Device(small_config(), Precision::Fp32, 1, 65, gputest::ctx()), Error);
  cuda::Gpt2Device dev(small_config(), Precision::Fp32, 2, 16, gputest::ctx());
  std::vector<int> tokens(3 * 16, 1), targets(3 * 16, 2);
  EXPECT_THROW(dev.forward_backward(tokens.data(), targets.data(), 3, 16), Error);
  EXPECT_THROW(dev.forward_backward(tokens.data(), targets.data(), 2, 17), Error);
}

// A batch smaller than the plan uses the prefix of every buffer: its loss equals that of a
// model planned exactly for it.
TEST(Gpt2Device, ASmallerBatchThanPlannedGivesTheSameLoss) {
  SKIP_WITHOUT_GPU();
  const CpuRun& ref = cpu_run();
  cuda::Gpt2Device big(small_config(), Precision::Fp32, kB, kT, gputest::ctx());
  cuda::Gpt2Device exact(small_config(), Precision::Fp32, 2, 16, gputest::ctx());
  big.upload_params(ref.init.data());
  exact.upload_params(ref.init.data());
  std::vector<int> tokens(2 * 16), targets(2 * 16);
  for (int i = 0; i < 32; ++i) tokens[i] = (5 * i) % 300, targets[i] = (5 * i + 5) % 300;
  EXPECT_EQ(big.forward_backward(tokens.data(), targets.data(), 2, 16),
            exact.forward_backward(tokens.data(), targets.data(), 2, 16));
}

}  // namespace
}  // namespace mptrain
