// End to end: GPT-2 trained on the GPU (cuda::Gpt2Device) against the CPU model (model/gpt2.h)
// with the CPU AdamW (optim/adamw.h) and clipping (optim/grad_norm.h), as train/step.cpp runs
// them: the same initial weights (Gpt2::init_weights), the same 20 batches, the same
// hyper-parameters. The CPU reference is fp32 in every case (the ground truth). One suite,
// parametrised over Gpt2DeviceOptions variants (flash/naive attention, fused/unfused kernels,
// padded/unpadded vocabulary, CUDA graphs); then pairs of variants against each other, the
// sampled-label pass (Sophia) against the CPU's, and the gradient-ready hook.
//
// The model: 2 layers, C = 128, NH = 2 (head size 64, so flash attention takes it), V = 300
// padded to 320 (or unpadded), B = 4, T = 32.
//
// Tolerances (relative): per-step loss fp32 1e-4 (two fp32 implementations that differ only in
// summation order), TF32 1e-2 (10-bit mantissa GEMM inputs), bf16/fp16 3e-2 (every activation,
// the residual stream and the logits stored in 16 bits, gradients rounded to 16 bits once; a
// wrongly wired tensor moves the loss by far more). Gradients after step 1, per tensor
// (relative norm error): fp32 1e-4, TF32 2e-2, fp16 5e-2, bf16 1e-1 (bf16's 8-bit mantissa on
// gradients summed over 128 tokens; a swapped or missing tensor gives an error near 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
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

using cuda::Gpt2Attention;
using cuda::Gpt2DeviceOptions;

constexpr int kB = 4, kT = 32, kSteps = 20, kV = 300;
constexpr float kLr = 1e-3f, kClip = 1.0f;

// padded: V = 300 padded to 320 (20 padded columns and wte rows); else Vp = V = 300.
Gpt2Config small_config(bool padded = true) {
  Gpt2Config c;
  c.block_size = 64;
  c.vocab_size = kV;
  c.padded_vocab_size = padded ? pad_vocab(kV, 64) : kV;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 128;
  return c;
}

// Batch s: each row an arithmetic sequence (step 3 mod V) from a row- and step-dependent start,
// so the loss falls over the 20 steps and tokens repeat (encoder backward sums duplicates);
// one ignored target (-1) per batch exercises the valid-token count.
void make_batch(int s, std::vector<int>& tokens, std::vector<int>& targets) {
  tokens.resize(kB * kT);
  targets.resize(kB * kT);
  for (int b = 0; b < kB; ++b)
    for (int t = 0; t < kT; ++t) {
      const int start = (37 * (b + s * kB) + 11) % kV;
      tokens[b * kT + t] = (start + 3 * t) % kV;
      targets[b * kT + t] = (start + 3 * (t + 1)) % kV;
    }
  targets[(s % kB) * kT + (s % kT)] = -1;
}

struct Training {
  std::vector<float> init, grads1, final_params;
  std::vector<float> losses;
};

// The CPU reference, once per process and vocabulary.
const Training& cpu_run(bool padded) {
  auto make = [](bool pad) {
    Training r;
    cpu::Context ctx;
    Gpt2 model(small_config(pad), ctx, Precision::Fp32);
    model.init_weights(1234);
    r.init.assign(model.params().data(), model.params().data() + model.num_params());
    model.plan(kB, kT);
    AdamW opt(model.table(), AdamWHyper{}, model.backend());
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
  };
  static const Training padded_run = make(true), unpadded_run = make(false);
  return padded ? padded_run : unpadded_run;
}

// The shape of one training step: B rows per micro-batch (a prefix of make_batch's kB rows),
// `accum` micro-batches whose gradients add up (forward_backward's accumulate).
struct StepShape {
  int B = kB;
  int accum = 1;
};
using Schedule = std::function<StepShape(int step)>;
StepShape constant_shape(int) { return {}; }
// Batch size and accumulation changing from step to step (what a CUDA graph cache keys on);
// step 0 keeps the full batch so that grads1 compares with the CPU's.
StepShape varied_shape(int s) { return {s % 3 == 1 ? 2 : kB, s % 4 == 2 ? 2 : 1}; }

// kSteps of training on the GPU from `init`, as the CPU reference (AdamW, clip kClip); step s
// runs schedule(s). grads1: step 1's fp32 gradients, unscaled (fp16). hook: set for the last
// micro-batch of every step (the stepper's use).
Training train_on_gpu(const Gpt2Config& config, const std::vector<float>& init, Precision p, const Gpt2DeviceOptions& opt,
                 const Schedule& schedule = constant_shape, const cuda::Gpt2Device::GradReadyFn& hook = nullptr) {
  cuda::Gpt2Device dev(config, p, kB, kT, gputest::ctx(), opt);
  EXPECT_EQ(dev.num_params(), init.size());
  dev.upload_params(init.data());
  Training r;
  std::vector<int> tokens, targets;
  for (int s = 0; s < kSteps; ++s) {
    const StepShape shape = schedule(s);
    const float scale = dev.loss_scaler() ? dev.loss_scaler()->scale() : 1.0f;
    double loss = 0.0;
    for (int m = 0; m < shape.accum; ++m) {
      make_batch(s + 1000 * m, tokens, targets);
      dev.set_grad_ready(m + 1 == shape.accum ? hook : nullptr);
      loss += dev.forward_backward(tokens.data(), targets.data(), shape.B, kT, scale / shape.accum, m > 0);
    }
    r.losses.push_back(static_cast<float>(loss / shape.accum));
    if (s == 0) {
      r.grads1.resize(dev.num_params());
      dev.download_grads(r.grads1.data());
      for (float& x : r.grads1) x /= scale;
    }
    EXPECT_TRUE(std::isfinite(r.losses.back())) << "step " << s + 1;
    EXPECT_TRUE(dev.step(kLr, AdamWHyper{}, kClip, s + 1)) << "step " << s + 1 << " skipped by the loss scaler";
    EXPECT_TRUE(std::isfinite(dev.last_grad_norm())) << "step " << s + 1;
  }
  r.final_params.resize(dev.num_params());
  dev.download_params(r.final_params.data());
  return r;
}

struct Tolerances {
  double loss, grad, params;
};
// Against the fp32 CPU model. Final parameters are compared in fp32 only (params 0 = not).
Tolerances cpu_tolerances(Precision p) {
  switch (p) {
    case Precision::Fp32:
      return {1e-4, 1e-4, 1e-4};
    case Precision::Tf32:
      return {1e-2, 2e-2, 0};
    case Precision::Fp16:
      return {3e-2, 5e-2, 0};
    case Precision::Bf16:
      return {3e-2, 1e-1, 0};
  }
  return {0, 0, 0};
}

// got against want: per-step losses (relative), step-1 gradients per tensor (relative norm
// error), final parameters (relative norm error, when tol.params > 0; 0 with tol 0 means
// bit-identical everywhere). No NaN/inf parameter in any case.
void expect_same_training(const Training& got, const Training& want, const ParamTable& table, const Tolerances& tol,
                          const std::string& what) {
  ASSERT_EQ(got.losses.size(), want.losses.size()) << what;
  for (size_t s = 0; s < want.losses.size(); ++s)
    EXPECT_LE(std::fabs(got.losses[s] - want.losses[s]), tol.loss * std::fabs(want.losses[s]))
        << what << " step " << s + 1 << ": loss " << got.losses[s] << ", reference " << want.losses[s];
  for (const ParamSpec& spec : table.specs()) {
    const std::vector<float> g(got.grads1.begin() + spec.offset, got.grads1.begin() + spec.offset + spec.numel);
    const std::vector<float> w(want.grads1.begin() + spec.offset, want.grads1.begin() + spec.offset + spec.numel);
    EXPECT_LE(gputest::rel_err(g, w), tol.grad) << what << ": step-1 gradient of " << spec.name;
  }
  size_t non_finite = 0;
  for (float x : got.final_params) non_finite += !std::isfinite(x);
  EXPECT_EQ(non_finite, 0u) << what << ": parameters with NaN/inf after " << kSteps << " steps";
  if (tol.params > 0 || tol.loss == 0) {
    EXPECT_LE(gputest::rel_err(got.final_params, want.final_params), tol.params)
        << what << ": parameters after " << kSteps << " steps";
  }
}

// ---- every variant against the CPU model ---------------------------------------------------

struct Variant {
  std::string name;
  Precision precision;
  Gpt2DeviceOptions options;
  bool padded_vocab = true;
};

Gpt2DeviceOptions with(Gpt2Attention attention, bool fused = true, bool graphs = false) {
  Gpt2DeviceOptions o;
  o.attention = attention;
  o.fused = fused;
  o.graphs = graphs;
  return o;
}

const Gpt2DeviceOptions kDefault{};
const Gpt2DeviceOptions kNaive = with(Gpt2Attention::Naive);
const Gpt2DeviceOptions kUnfused = with(Gpt2Attention::Flash, false);
const Gpt2DeviceOptions kGraphs = with(Gpt2Attention::Flash, true, true);

class Gpt2DeviceTest : public ::testing::TestWithParam<Variant> {};

TEST_P(Gpt2DeviceTest, TwentyStepsMatchTheCpuModel) {
  SKIP_WITHOUT_GPU();
  const Variant& v = GetParam();
  const Training& ref = cpu_run(v.padded_vocab);
  const Gpt2Config config = small_config(v.padded_vocab);
  const Training got = train_on_gpu(config, ref.init, v.precision, v.options);
  expect_same_training(got, ref, gpt2_param_table(config), cpu_tolerances(v.precision), v.name);
}

// The default options (flash where it applies, fused) in every precision, then one option
// changed at a time. Flash runs only in 16 bits: fp32/TF32 fall back to naive (checked below).
INSTANTIATE_TEST_SUITE_P(
    Variants, Gpt2DeviceTest,
    ::testing::Values(Variant{"fp32", Precision::Fp32, kDefault}, Variant{"tf32", Precision::Tf32, kDefault},
                      Variant{"bf16", Precision::Bf16, kDefault}, Variant{"fp16", Precision::Fp16, kDefault},
                      Variant{"bf16_naive", Precision::Bf16, kNaive}, Variant{"fp16_naive", Precision::Fp16, kNaive},
                      Variant{"fp32_unfused", Precision::Fp32, kUnfused},
                      Variant{"bf16_unfused", Precision::Bf16, kUnfused},
                      Variant{"fp32_unpadded", Precision::Fp32, kDefault, false},
                      Variant{"bf16_unpadded", Precision::Bf16, kDefault, false},
                      Variant{"fp32_graphs", Precision::Fp32, kGraphs},
                      Variant{"bf16_graphs", Precision::Bf16, kGraphs}),
    [](const ::testing::TestParamInfo<Variant>& info) { return info.param.name; });

// ---- pairs of variants: the same training, within the stated tolerance ----------------------

struct Pair {
  std::string name;
  Precision precision;
  Gpt2DeviceOptions reference, candidate;
  Tolerances tol;
};

class Gpt2DevicePairTest : public ::testing::TestWithParam<Pair> {};

// Both run the varied schedule (batch sizes and accumulation changing between steps).
TEST_P(Gpt2DevicePairTest, SameTrainingAsTheReferenceOptions) {
  SKIP_WITHOUT_GPU();
  const Pair& pair = GetParam();
  const Training& ref = cpu_run(true);
  const Gpt2Config config = small_config(true);
  const Training want = train_on_gpu(config, ref.init, pair.precision, pair.reference, varied_shape);
  const Training got = train_on_gpu(config, ref.init, pair.precision, pair.candidate, varied_shape);
  expect_same_training(got, want, gpt2_param_table(config), pair.tol, pair.name);
}

// Flash vs naive: P and dS rounded to T at different points (flash recomputes P from lse), so
// the 16-bit tolerances; parameters after 20 AdamW steps 5e-2 (AdamW's normalised update
// turns rounding on near-zero gradients into full-size steps). Unfused vs fused: fp32 differs
// only in the loss twin (1e-5 on losses, test_crossentropy_gpu); bf16 also in the GELU
// epilogue. Graphs vs eager: the same kernels on the same pointers, so bit-identical (0).
INSTANTIATE_TEST_SUITE_P(
    Pairs, Gpt2DevicePairTest,
    ::testing::Values(Pair{"bf16_flash_vs_naive", Precision::Bf16, kNaive, kDefault, {1e-2, 1e-1, 5e-2}},
                      Pair{"fp16_flash_vs_naive", Precision::Fp16, kNaive, kDefault, {1e-2, 5e-2, 5e-2}},
                      Pair{"fp32_unfused_vs_fused", Precision::Fp32, kDefault, kUnfused, {1e-5, 1e-4, 1e-4}},
                      Pair{"bf16_unfused_vs_fused", Precision::Bf16, kDefault, kUnfused, {1e-2, 1e-1, 5e-2}},
                      Pair{"fp32_graphs_vs_eager", Precision::Fp32, kDefault, kGraphs, {0, 0, 0}},
                      Pair{"bf16_graphs_vs_eager", Precision::Bf16, kDefault, kGraphs, {0, 0, 0}},
                      Pair{"fp16_graphs_vs_eager", Precision::Fp16, kDefault, kGraphs, {0, 0, 0}}),
    [](const ::testing::TestParamInfo<Pair>& info) { return info.param.name; });

// ---- what the options resolve to --------------------------------------------------------------

TEST(Gpt2DeviceOptions, FlashRunsOnlyWhereSupportedElseNaive) {
  SKIP_WITHOUT_GPU();
  auto applied = [](Precision p, const Gpt2Config& c) {
    return cuda::Gpt2Device(c, p, 1, 8, gputest::ctx()).options().attention;
  };
  EXPECT_EQ(applied(Precision::Bf16, small_config()), Gpt2Attention::Flash);
  EXPECT_EQ(applied(Precision::Fp16, small_config()), Gpt2Attention::Flash);
  EXPECT_EQ(applied(Precision::Fp32, small_config()), Gpt2Attention::Naive);
  EXPECT_EQ(applied(Precision::Tf32, small_config()), Gpt2Attention::Naive);
  Gpt2Config hs32 = small_config();
  hs32.n_head = 4;  // head size 32: no flash kernel
  EXPECT_EQ(applied(Precision::Bf16, hs32), Gpt2Attention::Naive);
}

// The flash arena keeps lse [B,NH,T] per layer instead of the probabilities [B,NH,T,T]; the
// unfused loss adds an fp32 [B·T, Vp] probability buffer.
TEST(Gpt2DeviceOptions, MemoryFollowsTheOptions) {
  SKIP_WITHOUT_GPU();
  auto bytes = [](const Gpt2DeviceOptions& o) {
    return cuda::Gpt2Device(small_config(), Precision::Bf16, kB, kT, gputest::ctx(), o).device_bytes();
  };
  EXPECT_LT(bytes(kDefault), bytes(kNaive));
  EXPECT_GE(bytes(kUnfused), bytes(kDefault) + static_cast<size_t>(kB) * kT * 320 * sizeof(float));
}

// ---- CUDA graphs ---------------------------------------------------------------------------------

// The first call of a shape runs eagerly, the second captures and replays, later ones replay:
// the same batch gives bit-identical losses and gradients every time (no optimizer step in
// between), for both losses; a new shape is eager once, then captured; a Context::scratch that
// another user reallocated makes the step capture again (the old graph's pointer is stale).
TEST(Gpt2DeviceGraphs, CapturedOncePerShapeAndReplayedBitIdentically) {
  SKIP_WITHOUT_GPU();
  const Training& ref = cpu_run(true);
  cuda::Gpt2Device dev(small_config(), Precision::Bf16, kB, kT, gputest::ctx(), kGraphs);
  ASSERT_TRUE(dev.options().graphs);
  dev.upload_params(ref.init.data());
  std::vector<int> tokens, targets;
  make_batch(0, tokens, targets);
  auto grads = [&] {
    std::vector<float> g(dev.num_params());
    dev.download_grads(g.data());
    return g;
  };
  const float eager = dev.forward_backward(tokens.data(), targets.data(), kB, kT);
  const std::vector<float> eager_grads = grads();
  EXPECT_EQ(dev.captured_graphs(), 0u) << "the first call of a shape must run eagerly (warm-up)";
  for (int call = 0; call < 3; ++call) {
    EXPECT_EQ(dev.forward_backward(tokens.data(), targets.data(), kB, kT), eager) << "replay " << call;
    EXPECT_EQ(grads(), eager_grads) << "replay " << call;
  }
  EXPECT_EQ(dev.captured_graphs(), 1u);
  // A smaller batch: eager once, then its own graph.
  const float small = dev.forward_backward(tokens.data(), targets.data(), 2, kT);
  EXPECT_EQ(dev.captured_graphs(), 1u);
  EXPECT_EQ(dev.forward_backward(tokens.data(), targets.data(), 2, kT), small);
  EXPECT_EQ(dev.captured_graphs(), 2u);
  // Sampled labels under the graphs: the loss kernel runs eagerly with this call's counter.
  std::vector<int> l1(kB * kT), l2(kB * kT);
  const float s1 = dev.forward_backward_sampled(tokens.data(), l1.data(), kB, kT, 1.0f, 9, 1);
  const float s2 = dev.forward_backward_sampled(tokens.data(), l2.data(), kB, kT, 1.0f, 9, 2);
  std::vector<int> l1b(kB * kT);
  EXPECT_EQ(dev.forward_backward_sampled(tokens.data(), l1b.data(), kB, kT, 1.0f, 9, 1), s1);
  EXPECT_EQ(l1b, l1);
  EXPECT_NE(l2, l1) << "counter 2 drew the labels of counter 1: the counter is frozen in a graph";
  (void)s2;
  // Another user grows the shared scratch: the next step captures again, same results.
  gputest::ctx().scratch(64u << 20);
  EXPECT_EQ(dev.forward_backward(tokens.data(), targets.data(), kB, kT), eager);
  EXPECT_EQ(grads(), eager_grads);
}

// ---- Sophia's sampled-label pass against the CPU's ---------------------------------------------

class Gpt2DeviceSampledTest : public ::testing::TestWithParam<Precision> {};

// Labels: the CPU's (same seed and counter) except where a row's uniform lies within rounding of
// a CDF boundary; the logits differ in their last bits (fp32) or by 16-bit rounding, so a few
// rows may flip: at most 1 of 128 in fp32, 4 in 16 bits. Loss and gradients: the CPU's
// forward_backward with targets = the GPU's labels (every row counted, so the mean over all
// B·T positions, as the sampled pass), at the precision's tolerances.
TEST_P(Gpt2DeviceSampledTest, LabelsLossAndGradientsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const Precision p = GetParam();
  const Tolerances tol = cpu_tolerances(p);
  const Training& ref = cpu_run(true);
  const float grad_scale = p == Precision::Fp16 ? 1024.0f : 0.5f;  // fp16: a loss scale, or small gradients underflow
  const uint64_t seed = 77, counter = 5;
  std::vector<int> tokens, targets;
  make_batch(3, tokens, targets);

  cuda::Gpt2Device dev(small_config(), p, kB, kT, gputest::ctx());
  dev.upload_params(ref.init.data());
  std::vector<int> labels(kB * kT, -7);
  const float loss = dev.forward_backward_sampled(tokens.data(), labels.data(), kB, kT, grad_scale, seed, counter);
  std::vector<float> grads(dev.num_params());
  dev.download_grads(grads.data());

  cpu::Context cctx;
  Gpt2 model(small_config(), cctx, Precision::Fp32);
  std::copy(ref.init.begin(), ref.init.end(), model.params().data());
  model.plan(kB, kT);
  model.zero_grad();
  std::vector<int> cpu_labels(kB * kT);
  model.forward_backward_sampled(tokens.data(), cpu_labels.data(), kB, kT, grad_scale, seed, counter);
  int differ = 0;
  for (int i = 0; i < kB * kT; ++i) {
    ASSERT_GE(labels[i], 0) << "row " << i << ": no label drawn";
    ASSERT_LT(labels[i], kV) << "row " << i << ": a padded column drawn";
    differ += labels[i] != cpu_labels[i];
  }
  EXPECT_LE(differ, p == Precision::Fp32 ? 1 : 4) << "labels differing from the CPU's";

  model.zero_grad();
  const float want = model.forward_backward(tokens.data(), labels.data(), kB, kT, grad_scale);
  EXPECT_LE(std::fabs(loss - want), tol.loss * std::fabs(want)) << "loss " << loss << ", CPU " << want;
  const float* g = model.grads().data();
  for (const ParamSpec& spec : dev.table().specs()) {
    const std::vector<float> got(grads.begin() + spec.offset, grads.begin() + spec.offset + spec.numel);
    const std::vector<float> cpu(g + spec.offset, g + spec.offset + spec.numel);
    EXPECT_LE(gputest::rel_err(got, cpu), tol.grad) << "gradient of " << spec.name;
  }
  // The gradients are written (=): a second identical call gives the same, not twice.
  std::vector<int> labels2(kB * kT);
  EXPECT_EQ(dev.forward_backward_sampled(tokens.data(), labels2.data(), kB, kT, grad_scale, seed, counter), loss);
  EXPECT_EQ(labels2, labels);
  std::vector<float> grads2(dev.num_params());
  dev.download_grads(grads2.data());
  EXPECT_EQ(grads2, grads);
}

INSTANTIATE_TEST_SUITE_P(Precisions, Gpt2DeviceSampledTest,
                         ::testing::Values(Precision::Fp32, Precision::Bf16, Precision::Fp16),
                         [](const ::testing::TestParamInfo<Precision>& info) {
                           return std::string(precision_name(info.param));
                         });

// ---- the gradient-ready hook ---------------------------------------------------------------------

class Gpt2DeviceHookTest : public ::testing::TestWithParam<Variant> {};

// The ranges: ln_f, h.1, h.0, then wte + wpe, each starting at its first tensor, together
// [0, n) once; and a run with the hook (set for the last micro-batch of each step, under the
// varied schedule, so 16-bit accumulation casts per range) trains bit-identically to one without.
TEST_P(Gpt2DeviceHookTest, RangesInBackwardOrderCoverEveryParameterOnce) {
  SKIP_WITHOUT_GPU();
  const Variant& v = GetParam();
  const Training& ref = cpu_run(true);
  const Gpt2Config config = small_config(true);
  const ParamTable table = gpt2_param_table(config);
  const size_t n = table.total();
  std::vector<std::pair<size_t, size_t>> calls;
  const Training with_hook = train_on_gpu(config, ref.init, v.precision, v.options, varied_shape,
                                     [&](size_t b, size_t e) { calls.emplace_back(b, e); });
  const size_t per_step = config.n_layer + 2;
  ASSERT_EQ(calls.size(), per_step * kSteps) << "one call per range per step (last micro-batch only)";
  const std::vector<std::pair<size_t, size_t>> want = {{table.get("ln_f.weight").offset, n},
                                                       {table.get("h.1.ln_1.weight").offset,
                                                        table.get("ln_f.weight").offset},
                                                       {table.get("h.0.ln_1.weight").offset,
                                                        table.get("h.1.ln_1.weight").offset},
                                                       {0, table.get("h.0.ln_1.weight").offset}};
  ASSERT_EQ(cuda::Gpt2Device::grad_ready_ranges(config), want);
  for (int s = 0; s < kSteps; ++s)
    for (size_t i = 0; i < per_step; ++i)
      EXPECT_EQ(calls[s * per_step + i], want[i]) << "step " << s + 1 << ", call " << i;
  const Training without = train_on_gpu(config, ref.init, v.precision, v.options, varied_shape);
  expect_same_training(with_hook, without, table, {0, 0, 0}, v.name + " with vs without the hook");
}

INSTANTIATE_TEST_SUITE_P(Variants, Gpt2DeviceHookTest,
                         ::testing::Values(Variant{"fp32", Precision::Fp32, kDefault},
                                           Variant{"bf16", Precision::Bf16, kDefault},
                                           Variant{"bf16_graphs", Precision::Bf16, kGraphs}),
                         [](const ::testing::TestParamInfo<Variant>& info) { return info.param.name; });

// ---- without a GPU, and sizes ------------------------------------------------------------------

// The hook's ranges from the table alone: ln_f, h.L-1 ... h.0, wte + wpe, each starting at its
// first tensor, contiguous and covering [0, n) once (a 12-layer table: h.10 must not be h.1's).
TEST(Gpt2DeviceReference, GradReadyRangesCoverTheTableInBackwardOrder) {
  for (int L : {1, 2, 12}) {
    Gpt2Config c = small_config();
    c.n_layer = L;
    const ParamTable table = gpt2_param_table(c);
    const std::vector<std::pair<size_t, size_t>> r = cuda::Gpt2Device::grad_ready_ranges(c);
    ASSERT_EQ(r.size(), static_cast<size_t>(L) + 2) << "L=" << L;
    EXPECT_EQ(r.front(), std::make_pair(table.get("ln_f.weight").offset, table.total()));
    for (int l = L - 1; l >= 0; --l)
      EXPECT_EQ(r[1 + (L - 1 - l)].first, table.get("h." + std::to_string(l) + ".ln_1.weight").offset) << l;
    EXPECT_EQ(r.back(), std::make_pair(size_t{0}, table.get("wpe.weight").offset + table.get("wpe.weight").numel));
    for (size_t i = 1; i < r.size(); ++i) EXPECT_EQ(r[i].second, r[i - 1].first) << "gap or overlap at " << i;
  }
}

// The CPU reference itself (runs without a GPU): finite losses that fall over the 20 steps (the
// batches are learnable), so that matching it step by step is a real check of training.
TEST(Gpt2DeviceReference, CpuLossFallsOverTheTwentySteps) {
  for (bool padded : {true, false}) {
    const Training& ref = cpu_run(padded);
    ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps));
    for (float l : ref.losses) EXPECT_TRUE(std::isfinite(l));
    EXPECT_NEAR(ref.losses.front(), std::log(static_cast<float>(kV)), 0.3f);  // near-uniform predictions at init
    EXPECT_LT(ref.losses.back(), ref.losses.front() - 0.1f) << (padded ? "padded" : "unpadded");
  }
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
  const Training& ref = cpu_run(true);
  cuda::Gpt2Device big(small_config(), Precision::Fp32, kB, kT, gputest::ctx());
  cuda::Gpt2Device exact(small_config(), Precision::Fp32, 2, 16, gputest::ctx());
  big.upload_params(ref.init.data());
  exact.upload_params(ref.init.data());
  std::vector<int> tokens(2 * 16), targets(2 * 16);
  for (int i = 0; i < 32; ++i) tokens[i] = (5 * i) % kV, targets[i] = (5 * i + 5) % kV;
  EXPECT_EQ(big.forward_backward(tokens.data(), targets.data(), 2, 16),
            exact.forward_backward(tokens.data(), targets.data(), 2, 16));
}

}  // namespace
}  // namespace mptrain
