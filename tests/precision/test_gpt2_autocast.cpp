// Mixed-precision GPT-2 against PyTorch's CPU autocast (tests/ref/gpt2_autocast.py, Debian's
// python3-torch 1.13): same weights and batch.
//   bf16 vs torch bf16 autocast: loss within 1e-2 relative, every parameter's gradient cosine
//        similarity above 0.99 (the check).
//   fp16 vs torch: torch 1.13's CPU autocast refuses float16, so our fp16 is compared with
//        torch fp32 (loss 3e-3 relative, cosine 0.999); when a newer torch runs fp16 autocast
//        on the CPU, it is compared with that too (loss 1e-2, cosine 0.99).
//   tf32 vs torch fp32: loss 2e-3, cosine 0.999 (torch has no TF32 on the CPU).
//   our fp32 vs torch fp32: loss 1e-5 (sanity: the same model and batch on both sides).
// A small model (2 layers, C=64, 4 heads, T=32) on random tokens over a 512-token vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "common/test_util.h"
#include "io/safetensors.h"
#include "model/gpt2.h"
#include "common/host_backend.h"

namespace mptrain {
namespace {

TEST(Gpt2Autocast, MixedPrecisionMatchesPyTorchCpuAutocast) {
  if (!testing::have_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch and numpy is not installed";
  Gpt2Config cfg;
  cfg.n_layer = 2;
  cfg.n_head = 4;
  cfg.n_embd = 64;
  cfg.vocab_size = 500;
  cfg.padded_vocab_size = pad_vocab(500, 64);
  cfg.block_size = 32;
  const int B = 4, T = 32;
  std::vector<int> inputs, targets;
  uint64_t s = 2024;
  for (int i = 0; i < B * T + 1; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    inputs.push_back(static_cast<int>((s >> 33) % cfg.vocab_size));
  }
  targets.assign(inputs.begin() + 1, inputs.end());
  inputs.pop_back();

  cpu::Context ctx;
  Gpt2 base(cfg, cpu_backend(ctx));
  base.init_weights(11);
  // Non-trivial LayerNorm and bias values, so that their gradients are exercised.
  for (const auto& spec : base.table().specs())
    if (spec.init == InitRule::Zeros || spec.init == InitRule::Ones)
      for (size_t i = 0; i < spec.numel; ++i)
        base.params()[spec.offset + i] += 0.05f * static_cast<float>((i * 7919) % 17) / 17.0f;

  testing::TempDir tmp;
  {
    SafetensorsWriter in;
    for (const auto& spec : base.table().specs())
      in.add(spec.name, DType::F32, spec.hf_shape, base.params().data() + spec.offset);
    in.add("inputs", DType::I32, {B, T}, inputs.data());
    in.add("targets", DType::I32, {B, T}, targets.data());
    in.set_metadata("n_layer", std::to_string(cfg.n_layer));
    in.set_metadata("n_head", std::to_string(cfg.n_head));
    in.set_metadata("n_embd", std::to_string(cfg.n_embd));
    in.set_metadata("vocab_size", std::to_string(cfg.vocab_size));
    in.set_metadata("block_size", std::to_string(cfg.block_size));
    in.write(tmp / "in.safetensors");
  }
  const auto r =
      testing::run_command("/usr/bin/python3 " + testing::source_dir() + "/tests/ref/gpt2_autocast.py " +
                           (tmp / "in.safetensors") + " " + (tmp / "out.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  SafetensorsFile ref(tmp / "out.safetensors");
  const bool torch_fp16 = ref.metadata().count("fp16") && ref.metadata().at("fp16") == "1";

  auto check = [&](Precision p, const std::string& tag, double loss_tol, double min_cos) {
    Gpt2 m(cfg, cpu_backend(ctx), p);
    std::copy(base.params().data(), base.params().data() + base.num_params(), m.params().data());
    m.plan(B, T);
    m.zero_grad();
    const float loss = m.forward_backward(inputs.data(), targets.data(), B, T, 1.0f);
    float ref_loss;
    const std::vector<int64_t> one{1};
    ref.read_f32(tag + ".loss", one, &ref_loss);
    const std::string what = std::string(precision_name(p)) + " vs torch " + tag;
    ASSERT_TRUE(std::isfinite(loss)) << what;
    EXPECT_LT(std::fabs(loss - ref_loss) / ref_loss, loss_tol) << what << ": " << loss << " vs " << ref_loss;
    for (const auto& spec : m.table().specs()) {
      std::vector<float> g(spec.hf_numel());
      ref.read_f32(tag + ".grad." + spec.name, spec.hf_shape, g.data());
      const float* ours = m.grads().data() + spec.offset;
      for (size_t i = 0; i < g.size(); ++i) ASSERT_TRUE(std::isfinite(ours[i])) << what << ": " << spec.name;
      EXPECT_GT(testing::cosine(ours, g.data(), g.size()), min_cos) << what << ": " << spec.name;
    }
  };
  check(Precision::Fp32, "fp32", 1e-5, 0.99999);
  check(Precision::Bf16, "bf16", 1e-2, 0.99);
  check(Precision::Tf32, "fp32", 2e-3, 0.999);
  check(Precision::Fp16, "fp32", 3e-3, 0.999);
  if (torch_fp16) check(Precision::Fp16, "fp16", 1e-2, 0.99);
}

}  // namespace
}  // namespace mptrain
