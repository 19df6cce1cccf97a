// cuda::DeviceOptimizer (backend/cuda/device_optimizer.h) against the CPU optimizers and
// train/step.cpp's rules, over a small GPT-2 parameter table (decayed and non-decayed tensors,
// padded wte rows): AdamW and Sophia for several clipped steps (fp32 masters 1e-6 relative,
// the bf16 copy the rounded masters exactly), Sophia's Hessian step (h, the win rate over the
// real coordinates, the counter), the state's upload/download in the CPU layout, a table cut
// into three segments (the ZeRO-1 shape) equal to the whole, an fp16 overflow that leaves
// parameters and state bitwise unchanged and halves the scale, the numeric guard, and the
// refusals (bad segments, a host optimizer of another kind). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "backend/cuda/device_optimizer.h"
#include "common/host_backend.h"
#include "core/error.h"
#include "cuda/gpu_test_util.h"
#include "model/gpt2.h"
#include "optim/adamw.h"
#include "optim/grad_norm.h"
#include "optim/sophia.h"

namespace mptrain {
namespace {

using namespace gputest;

constexpr float kLr = 1e-3f, kClip = 1.0f;
constexpr int kSteps = 6;

ParamTable small_table() {
  Gpt2Config c;
  c.block_size = 64;
  c.vocab_size = 300;
  c.padded_vocab_size = pad_vocab(300, 64);  // 20 padded wte rows
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 64;
  return gpt2_param_table(c);
}

// Gradients of step s, zero on padded wte rows (as a model's), large enough that clip bites.
std::vector<float> grads_for(const ParamTable& table, int s) {
  std::vector<float> g = randn(table.total(), 100 + s, 0.02f);
  for (const ParamSpec& spec : table.specs())
    for (size_t i = spec.hf_numel(); i < spec.numel; ++i) g[spec.offset + i] = 0.0f;
  return g;
}

using cuda::DeviceBuffer;

// The model's buffers on the device.
struct Model {
  DeviceBuffer<float> params, grads;
  DeviceBuffer<Bf16> lowp;
  Model(const std::vector<float>& p, size_t n) : params(p, ctx()), grads(n), lowp(n) {}
};

// train/step.cpp's host order (norm, guard, clip, update) on the CPU optimizer.
double cpu_step(Optimizer& opt, std::vector<float>& p, std::vector<float> g, int64_t t) {
  const double norm = global_norm(g.data(), g.size());
  clip_grad_norm(g.data(), g.size(), norm, kClip);
  opt.step(p.data(), g.data(), kLr, t);
  return norm;
}

cuda::DeviceOptimizerConfig config_of(const Optimizer& host) { return cuda::device_optimizer_config(host); }

std::unique_ptr<Optimizer> make_host(OptimizerKind kind, const ParamTable& table) {
  if (kind == OptimizerKind::AdamW) return std::make_unique<AdamW>(table, AdamWHyper{}, host_backend());
  SophiaHyper h;
  h.k = 2;
  return std::make_unique<Sophia>(table, h, 4096.0, 7, host_backend());
}

// Runs kSteps clipped steps (Sophia: a Hessian step after every even one) on the GPU with the
// given segments and on the CPU; compares parameters, the bf16 copy, state and win rates.
void compare(OptimizerKind kind, const std::vector<cuda::FlatRange>& segments) {
  const ParamTable table = small_table();
  const size_t n = table.total();
  std::vector<float> p = randn(n, 1, 0.1f);
  auto host = make_host(kind, table);
  Model dev(p, n);
  cuda::DeviceOptimizer opt(table, config_of(*host), ctx(), segments);
  opt.bind(dev.params.data(), dev.grads.data(), dev.lowp.data(), StorageType::BF16);
  for (int s = 1; s <= kSteps; ++s) {
    const std::vector<float> g = grads_for(table, s);
    dev.grads.upload(g, ctx());
    const auto r = opt.guarded_step(1.0f, kLr, kClip, s);
    const double norm = cpu_step(*host, p, g, s);
    ASSERT_FALSE(r.skipped || r.non_finite) << "step " << s;
    EXPECT_NEAR(r.grad_norm, norm, 1e-9 * norm) << "step " << s;
    ASSERT_EQ(opt.curvature_due(s), host->curvature_due(s)) << "step " << s;
    if (host->curvature_due(s)) {
      ASSERT_EQ(opt.curvature_counter(), host->curvature_counter());
      std::vector<float> ghat = grads_for(table, 50 + s);
      for (float& x : ghat) x *= 10.0f;  // clipped
      dev.grads.upload(ghat, ctx());
      const auto c = opt.update_curvature(kClip);
      const double cnorm = global_norm(ghat.data(), n);
      clip_grad_norm(ghat.data(), n, cnorm, kClip);
      const double win = host->update_curvature(ghat.data());
      ASSERT_TRUE(c.made) << "step " << s;
      EXPECT_NEAR(c.norm, cnorm, 1e-9 * cnorm);
      EXPECT_NEAR(c.win_rate, win, 1e-3) << "step " << s;  // a coordinate at the bound may flip
      EXPECT_EQ(opt.curvature_counter(), host->curvature_counter());
    }
  }
  const std::vector<float> got = download(dev.params);
  EXPECT_LT(rel_err(got, p), 1e-6);
  const std::vector<float> lowp = download(dev.lowp);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(lowp[i], to_float(f32_to_bf16(got[i]))) << "bf16 copy at " << i;
  auto back = make_host(kind, table);
  opt.download_state(*back);
  for (size_t r = 0; r < host->state().size(); ++r) {
    const FloatBuffer& want = host->state()[r].buffer;
    const FloatBuffer& have = back->state()[r].buffer;
    EXPECT_LT(rel_err(std::vector<float>(have.data(), have.data() + n), std::vector<float>(want.data(), want.data() + n)),
              1e-5)
        << host->state()[r].prefix;
  }
  EXPECT_EQ(back->curvature_counter(), host->curvature_counter());
}

TEST(DeviceOptimizerGpu, AdamWMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  compare(OptimizerKind::AdamW, {});
}

TEST(DeviceOptimizerGpu, SophiaWithHessianStepsMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  compare(OptimizerKind::Sophia, {});
}

// Three segments covering the table, cut inside tensors (wte's padding included): the ZeRO-1
// shape on one process; the same numbers as one segment.
std::vector<cuda::FlatRange> three_segments(size_t n) {
  const size_t a = n / 3 / 16 * 16, b = 2 * n / 3 / 16 * 16;
  return {{0, a}, {a, b}, {b, n}};
}

TEST(DeviceOptimizerGpu, SegmentsEqualTheWholeTable) {
  SKIP_WITHOUT_GPU();
  const size_t n = small_table().total();
  compare(OptimizerKind::AdamW, three_segments(n));
  compare(OptimizerKind::Sophia, three_segments(n));
}

TEST(DeviceOptimizerGpu, StateUploadRoundTrips) {
  SKIP_WITHOUT_GPU();
  const ParamTable table = small_table();
  const size_t n = table.total();
  auto host = make_host(OptimizerKind::Sophia, table);
  const std::vector<float> m = randn(n, 3), h = randn(n, 4);
  std::memcpy(host->state()[0].buffer.data(), m.data(), n * sizeof(float));
  std::memcpy(host->state()[1].buffer.data(), h.data(), n * sizeof(float));
  host->set_scalar_state({{"hessian_updates", "5"}});
  cuda::DeviceOptimizer opt(table, config_of(*host), ctx(), three_segments(n));
  opt.upload_state(*host);
  EXPECT_EQ(opt.curvature_counter(), 5u);
  auto back = make_host(OptimizerKind::Sophia, table);
  opt.download_state(*back);
  EXPECT_EQ(std::memcmp(back->state()[0].buffer.data(), m.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(back->state()[1].buffer.data(), h.data(), n * sizeof(float)), 0);
  EXPECT_EQ(back->curvature_counter(), 5u);
  auto adamw = make_host(OptimizerKind::AdamW, table);
  EXPECT_THROW(opt.upload_state(*adamw), Error);  // a checkpoint of another optimizer
}

// fp16: an inf gradient skips the step (parameters, state and the 16-bit copy bitwise
// unchanged), halves the scale; the next clean step updates.
TEST(DeviceOptimizerGpu, Fp16OverflowLeavesEverythingUnchanged) {
  SKIP_WITHOUT_GPU();
  const ParamTable table = small_table();
  const size_t n = table.total();
  for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::Sophia}) {
    auto host = make_host(kind, table);
    Model dev(randn(n, 1, 0.1f), n);
    LossScaler scaler(LossScalerConfig{.init_scale = 1024.0f});
    cuda::DeviceOptimizer opt(table, config_of(*host), ctx());
    opt.bind(dev.params.data(), dev.grads.data(), dev.lowp.data(), StorageType::BF16);
    opt.set_loss_scaler(&scaler);
    std::vector<float> g = grads_for(table, 1);
    for (float& x : g) x *= 1024.0f;
    dev.grads.upload(g, ctx());
    ASSERT_FALSE(opt.guarded_step(1.0f, kLr, kClip, 1).skipped);  // moves state off zero
    const std::vector<float> p0 = download(dev.params), l0 = download(dev.lowp);
    auto s0 = make_host(kind, table);
    opt.download_state(*s0);
    g[n / 2] = std::numeric_limits<float>::infinity();
    dev.grads.upload(g, ctx());
    const float scale = scaler.scale();
    const auto r = opt.guarded_step(1.0f, kLr, kClip, 2);
    EXPECT_TRUE(r.skipped);
    EXPECT_TRUE(std::isinf(r.grad_norm));
    EXPECT_EQ(scaler.scale(), scale * 0.5f);
    const std::vector<float> p1 = download(dev.params), l1 = download(dev.lowp);
    EXPECT_EQ(std::memcmp(p0.data(), p1.data(), n * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(l0.data(), l1.data(), n * sizeof(float)), 0);
    auto s1 = make_host(kind, table);
    opt.download_state(*s1);
    for (size_t k = 0; k < s0->state().size(); ++k)
      EXPECT_EQ(std::memcmp(s0->state()[k].buffer.data(), s1->state()[k].buffer.data(), n * sizeof(float)), 0);
  }
}

TEST(DeviceOptimizerGpu, NonFiniteLossMakesNoUpdate) {
  SKIP_WITHOUT_GPU();
  const ParamTable table = small_table();
  const size_t n = table.total();
  Model dev(randn(n, 1, 0.1f), n);
  cuda::DeviceOptimizer opt(table, cuda::DeviceOptimizerConfig{}, ctx());
  opt.bind(dev.params.data(), dev.grads.data(), nullptr, StorageType::BF16);
  dev.grads.upload(grads_for(table, 1), ctx());
  const std::vector<float> p0 = download(dev.params);
  const auto r = opt.guarded_step(std::numeric_limits<float>::quiet_NaN(), kLr, kClip, 1);
  EXPECT_TRUE(r.non_finite);
  EXPECT_TRUE(std::isfinite(r.grad_norm));
  EXPECT_EQ(download(dev.params), p0);
}

TEST(DeviceOptimizerGpu, BadSegmentsAreRefused) {
  SKIP_WITHOUT_GPU();
  const ParamTable table = small_table();
  const size_t n = table.total();
  const auto make = [&](std::vector<cuda::FlatRange> segments) {
    cuda::DeviceOptimizer opt(table, cuda::DeviceOptimizerConfig{}, ctx(), std::move(segments));
  };
  EXPECT_THROW(make({{3, 64}}), Error);               // unaligned
  EXPECT_THROW(make({{64, 128}, {0, 32}}), Error);    // not ascending
  EXPECT_THROW(make({{0, n + 16}}), Error);           // past the end
}

}  // namespace
}  // namespace mptrain
