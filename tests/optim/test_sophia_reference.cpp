// Sophia-G against a PyTorch transcription of the authors' algorithm
// (tests/ref/sophia_reference.py, Debian's python3-torch). From the same weights, five
// steps with a Hessian estimate after step 3 (k = 3): mptrain records each step's raw
// gradient, the labels it sampled and the raw gradient on them; the script runs its
// SophiaG on exactly those inputs (clipping, decay groups, ρ·b·h, EMA) and, with its own
// model, recomputes every gradient at its own parameters. Checked:
//   final parameters            relative error < 1e-5 per tensor (the bound)
//   mptrain's gradients         within 1e-4 of PyTorch's (as in the GPT-2 reference test),
//                               the gradient on the sampled labels included
//   loss on the sampled labels  1e-5 relative
//   win rate after the estimate the same fraction (±1e-4), and strictly between 0.05 and
//                               0.95 so that both branches of min(·, 1) are exercised
// The same five steps through train_step (the trainer's code path) must give bit-identical
// parameters to the hand-written sequence recorded here.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#include "backend/cpu/context.h"
#include "common/cpu_fp32.h"
#include "common/test_util.h"
#include "io/safetensors.h"
#include "model/gpt2.h"
#include "optim/sophia.h"
#include "train/step.h"
#include "common/host_backend.h"

namespace mptrain {
namespace {

using testing::relative_error;

std::string str(float x) {
  std::ostringstream o;
  o.precision(9);
  o << x;
  return o.str();
}

TEST(SophiaReference, FiveStepsWithAHessianEstimateMatchPyTorch) {
  if (!testing::have_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch and numpy is not installed";
  Gpt2Config cfg;
  cfg.n_layer = 2;
  cfg.n_head = 4;
  cfg.n_embd = 64;
  cfg.vocab_size = 101;
  cfg.padded_vocab_size = pad_vocab(101, 64);  // 128: padded rows must stay out of everything
  cfg.block_size = 32;
  const int B = 3, T = 17, N = B * T, steps = 5;
  // ρ is chosen for this tiny model so that the win rate after the estimate is mid-range.
  const SophiaHyper hyper{0.965f, 0.99f, 20.0f, 0.2f, 3};
  const float lrs[steps] = {1e-3f, 2e-3f, 2e-3f, 1.5e-3f, 1e-3f};
  const float clip = 1.0f;
  const uint64_t seed = 99;

  cpu::Context ctx;
  Gpt2 model(cfg, cpu_backend(ctx)), twin(cfg, cpu_backend(ctx));
  model.init_weights(7);
  for (const auto& spec : model.table().specs())  // non-trivial LayerNorms and biases
    if (spec.init == InitRule::Zeros || spec.init == InitRule::Ones)
      for (size_t i = 0; i < spec.numel; ++i)
        model.params()[spec.offset + i] += 0.05f * static_cast<float>((i * 7919) % 17) / 17.0f;
  std::memcpy(twin.params().data(), model.params().data(), model.num_params() * sizeof(float));
  model.plan(B, T);
  twin.plan(B, T);

  std::vector<int> inputs(static_cast<size_t>(steps) * N), targets(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i] = static_cast<int>((i * 37 + 11 + i / 13) % cfg.vocab_size);
    targets[i] = static_cast<int>((i * 53 + 7 + i / 7) % cfg.vocab_size);
  }

  SafetensorsWriter in;  // add() references its data until write(): the changing weights are copied
  for (const auto& spec : model.table().specs())
    in.add_copy(spec.name, DType::F32, spec.hf_shape, model.params().data() + spec.offset);
  in.add("inputs", DType::I32, {steps, B, T}, inputs.data());
  in.add("targets", DType::I32, {steps, B, T}, targets.data());
  in.add("lrs", DType::F32, {steps}, lrs);

  // The hand-written step sequence, recording what the script needs. Buffers outlive `in`.
  Sophia opt(model.table(), hyper, N, seed, model.backend());
  std::vector<std::vector<float>> recorded;
  std::vector<std::vector<int>> labels;
  recorded.reserve(2 * steps);
  auto record = [&](const std::string& prefix) {
    recorded.emplace_back(model.grads().data(), model.grads().data() + model.num_params());
    for (const auto& spec : model.table().specs())
      in.add(prefix + spec.name, DType::F32, spec.hf_shape, recorded.back().data() + spec.offset);
  };
  std::vector<float> hess_loss(steps, 0.0f);
  std::vector<double> win(steps, -1.0);
  for (int s = 0; s < steps; ++s) {
    const int* x = inputs.data() + static_cast<size_t>(s) * N;
    const int* y = targets.data() + static_cast<size_t>(s) * N;
    model.zero_grad();
    model.forward_backward(x, y, B, T, 1.0f);
    record("grad." + std::to_string(s) + ".");
    clip_grad_norm(model.grads().data(), model.num_params(), global_norm(model.grads().data(), model.num_params()),
                   clip);
    opt.step(model.params().data(), model.grads().data(), lrs[s], s + 1);
    if (opt.curvature_due(s + 1)) {
      labels.emplace_back(N);
      model.zero_grad();
      hess_loss[s] = model.forward_backward_sampled(x, labels.back().data(), B, T, 1.0f, opt.curvature_seed(),
                                                     opt.curvature_counter());
      in.add("labels." + std::to_string(s), DType::I32, {B, T}, labels.back().data());
      record("hgrad." + std::to_string(s) + ".");
      clip_grad_norm(model.grads().data(), model.num_params(),
                     global_norm(model.grads().data(), model.num_params()), clip);
      win[s] = opt.update_curvature(model.grads().data());
    }
  }
  ASSERT_EQ(labels.size(), 1u);
  EXPECT_EQ(opt.hessian_updates(), 1u);

  const std::map<std::string, std::string> meta = {
      {"n_layer", std::to_string(cfg.n_layer)},   {"n_head", std::to_string(cfg.n_head)},
      {"n_embd", std::to_string(cfg.n_embd)},     {"vocab_size", std::to_string(cfg.vocab_size)},
      {"block_size", std::to_string(cfg.block_size)}, {"steps", std::to_string(steps)},
      {"beta1", str(hyper.beta1)},                {"beta2", str(hyper.beta2)},
      {"rho", str(hyper.rho)},                    {"weight_decay", str(hyper.weight_decay)},
      {"k", std::to_string(hyper.k)},             {"grad_clip", str(clip)},
      {"tokens_per_step", std::to_string(N)}};
  for (const auto& [key, value] : meta) in.set_metadata(key, value);
  testing::TempDir tmp;
  in.write(tmp / "in.safetensors");
  const auto run = testing::run_command("/usr/bin/python3 " + testing::source_dir() + "/tests/ref/sophia_reference.py " +
                                        (tmp / "in.safetensors") + " " + (tmp / "out.safetensors"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  SafetensorsFile ref(tmp / "out.safetensors");

  std::vector<float> grad_err(steps), hgrad_err(steps), ref_hess_loss(steps), ref_win(steps);
  const std::vector<int64_t> shape{steps};
  ref.read_f32("grad_err", shape, grad_err.data());
  ref.read_f32("hgrad_err", shape, hgrad_err.data());
  ref.read_f32("hess_loss", shape, ref_hess_loss.data());
  ref.read_f32("win_rate", shape, ref_win.data());
  for (int s = 0; s < steps; ++s) {
    EXPECT_LT(grad_err[s], 1e-4) << "step " << s << ": mptrain's gradient vs PyTorch's";
    if (win[s] < 0) continue;
    EXPECT_LT(hgrad_err[s], 1e-4) << "step " << s << ": gradient on the sampled labels";
    EXPECT_NEAR(hess_loss[s], ref_hess_loss[s], 1e-5 * ref_hess_loss[s]) << "step " << s;
    EXPECT_NEAR(win[s], ref_win[s], 1e-4) << "step " << s;
    EXPECT_GT(win[s], 0.05) << "win rate too low to exercise the unclipped branch";
    EXPECT_LT(win[s], 0.95) << "win rate too high to exercise the clipped branch";
    std::printf("win rate after the estimate at step %d: mptrain %.4f, PyTorch %.4f\n", s + 1, win[s], ref_win[s]);
  }
  for (const auto& spec : model.table().specs()) {
    std::vector<float> p(spec.hf_numel());
    ref.read_f32("final." + spec.name, spec.hf_shape, p.data());
    const double err = relative_error(model.params().data() + spec.offset, p.data(), p.size());
    EXPECT_LT(err, 1e-5) << spec.name;
    for (size_t i = spec.hf_numel(); i < spec.numel; ++i)
      ASSERT_EQ(model.params()[spec.offset + i], 0.0f) << spec.name << " padded element " << i;
  }

  // The trainer's path: train_step with the same batches gives the same bits.
  Sophia twin_opt(twin.table(), hyper, N, seed, twin.backend());
  std::vector<int> xin(N), yin(N);
  for (int s = 0; s < steps; ++s) {
    auto batch = [&](int* a, int* b) {
      std::copy_n(inputs.data() + static_cast<size_t>(s) * N, N, a);
      std::copy_n(targets.data() + static_cast<size_t>(s) * N, N, b);
    };
    const StepStats st = train_step(twin, twin_opt, batch, B, T, 1, lrs[s], clip, s + 1, xin.data(), yin.data());
    EXPECT_EQ(st.curvature, win[s] >= 0) << "step " << s;
    if (st.curvature) {
      EXPECT_EQ(st.win_rate, win[s]);
      EXPECT_EQ(st.curvature_loss, hess_loss[s]);
      EXPECT_TRUE(std::equal(yin.begin(), yin.end(), labels[0].begin())) << "sampled labels differ";
    }
  }
  EXPECT_EQ(0, std::memcmp(twin.params().data(), model.params().data(), model.num_params() * sizeof(float)));
}

}  // namespace
}  // namespace mptrain
