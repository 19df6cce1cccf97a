// --recompute (model/recompute.h): for every choice, GPT-2's and Llama's loss and gradients have
// the bits of keeping every activation — fp32, TF32, bf16 and fp16 under the CPU's plan and bf16
// under the GPU's, over two micro-batches (the second backward reads what the first one's
// recomputation left in the shared buffers) — and each choice's plan holds less than keeping
// everything, block least of all.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cpu/cpu_backend.h"
#include "common/host_backend.h"
#include "common/tiny_gpt2.h"
#include "core/error.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "precision/policy.h"

namespace mptrain {
namespace {

Gpt2Config tiny_gpt2(RecomputeSet recompute) {
  Gpt2Config c = test::tiny_gpt2_config(3);
  c.recompute = recompute;
  return c;
}

constexpr int kB = 2, kT = 16;

struct Result {
  std::vector<float> losses, grads;
};

// Llama's tiny preset with QK-norm (its refill too) and either MLP.
LlamaConfig tiny_llama(RecomputeSet recompute, LlamaMlp mlp) {
  LlamaConfig c = llama_preset("llama-tiny", 128, {.mlp = mlp, .qk_norm = true});
  c.recompute = recompute;
  return c;
}

template <class Model, class Config>
Result run(const Config& config, Precision p, bool gpu_plan) {
  const Policy policy = make_policy(p, {}, gpu_plan ? kCudaCaps : cpu::CpuBackend(host_context()).caps());
  Model model(config, std::make_unique<cpu::CpuBackend>(host_context()), policy);
  model.init_weights(3);
  model.plan(kB, kT);
  std::vector<int> in(kB * kT), tg(kB * kT);
  Result r;
  for (int micro = 0; micro < 2; ++micro) {
    for (int i = 0; i < kB * kT; ++i) in[i] = (i * 5 + micro * 17) % 61, tg[i] = (i * 3 + micro + 1) % 61;
    r.losses.push_back(model.forward_backward(in.data(), tg.data(), kB, kT, 1.0f));
  }
  const FloatBuffer& g = model.grads();
  r.grads.assign(g.data(), g.data() + g.size());
  return r;
}

TEST(Gpt2Recompute, GradientsHaveTheBitsOfKeepingEverything) {
  const RecomputeSet sets[] = {parse_recompute("gelu"),      parse_recompute("norm"),
                               parse_recompute("attention"), parse_recompute("mlp"),
                               parse_recompute("block"),     parse_recompute("gelu,norm"),
                               parse_recompute("norm,mlp"),  parse_recompute("norm,attention,mlp")};
  struct Plan {
    Precision precision;
    bool gpu_plan;
  };
  for (const Plan pl : {Plan{Precision::Fp32, false}, Plan{Precision::Tf32, false}, Plan{Precision::Bf16, false},
                        Plan{Precision::Fp16, false}, Plan{Precision::Bf16, true}}) {
    const Result keep = run<Gpt2>(tiny_gpt2({}), pl.precision, pl.gpu_plan);
    for (const RecomputeSet s : sets) {
      const std::string what = std::string(precision_name(pl.precision)) + (pl.gpu_plan ? " (GPU plan)" : "") +
                               ", --recompute " + recompute_name(s);
      const Result got = run<Gpt2>(tiny_gpt2(s), pl.precision, pl.gpu_plan);
      EXPECT_EQ(got.losses, keep.losses) << what;
      ASSERT_EQ(got.grads.size(), keep.grads.size());
      EXPECT_EQ(std::memcmp(got.grads.data(), keep.grads.data(), keep.grads.size() * sizeof(float)), 0)
          << what << ": the gradients differ";
    }
  }
}

TEST(LlamaRecompute, GradientsHaveTheBitsOfKeepingEverything) {
  const RecomputeSet sets[] = {parse_recompute("norm"), parse_recompute("attention"), parse_recompute("mlp"),
                               parse_recompute("block"), parse_recompute("norm,attention,mlp")};
  struct Plan {
    Precision precision;
    bool gpu_plan;
  };
  for (const LlamaMlp mlp : {LlamaMlp::SwiGlu, LlamaMlp::Relu2})
    for (const Plan pl : {Plan{Precision::Fp32, false}, Plan{Precision::Bf16, false},
                          Plan{Precision::Fp16, false}, Plan{Precision::Bf16, true}}) {
      const Result keep = run<Llama>(tiny_llama({}, mlp), pl.precision, pl.gpu_plan);
      for (const RecomputeSet s : sets) {
        const std::string what =
            std::string(precision_name(pl.precision)) + (pl.gpu_plan ? " (GPU plan)" : "") +
            (mlp == LlamaMlp::Relu2 ? ", relu2" : ", swiglu") + ", --recompute " + recompute_name(s);
        const Result got = run<Llama>(tiny_llama(s, mlp), pl.precision, pl.gpu_plan);
        EXPECT_EQ(got.losses, keep.losses) << what;
        ASSERT_EQ(got.grads.size(), keep.grads.size());
        EXPECT_EQ(std::memcmp(got.grads.data(), keep.grads.data(), keep.grads.size() * sizeof(float)), 0)
            << what << ": the gradients differ";
      }
    }
  // Less memory, block least; and gelu is not Llama's activation.
  const cpu::CpuBackend be(host_context());
  const Policy policy = make_policy(Precision::Bf16, {}, be.caps());
  const auto bytes = [&](const char* set) {
    return llama_activation_plan(tiny_llama(parse_recompute(set), LlamaMlp::SwiGlu), policy, be, kB, kT)
        .total_bytes();
  };
  EXPECT_LT(bytes("norm"), bytes("none"));
  EXPECT_LT(bytes("mlp"), bytes("none"));
  EXPECT_LT(bytes("attention"), bytes("none"));
  EXPECT_LT(bytes("block"), bytes("norm,mlp"));
  EXPECT_THROW(check_recompute(parse_recompute("gelu"), RecomputeFamily::Llama), Error);
}

TEST(Gpt2Recompute, EachChoiceHoldsLessThanKeepingEverything) {
  const cpu::CpuBackend be(host_context());
  const Policy policy = make_policy(Precision::Bf16, {}, be.caps());
  const auto bytes = [&](const char* set) {
    return gpt2_activation_plan(tiny_gpt2(set ? parse_recompute(set) : RecomputeSet{}), policy, be, kB, kT)
        .total_bytes();
  };
  const size_t keep = bytes(nullptr), gelu = bytes("gelu"), norm = bytes("norm"), mlp = bytes("mlp"),
               both = bytes("norm,mlp"), block = bytes("block");
  EXPECT_LT(gelu, keep);
  EXPECT_LT(mlp, gelu);  // mlp shares the GELU output too, and the fc output
  EXPECT_EQ(bytes("gelu,mlp"), mlp);
  EXPECT_LT(bytes("gelu,norm"), gelu);
  EXPECT_LT(norm, keep);
  EXPECT_LT(bytes("attention"), keep);  // the CPU keeps the probabilities
  EXPECT_EQ(bytes("block,attention"), block);
  EXPECT_LT(mlp, keep);
  EXPECT_LT(both, norm);
  EXPECT_LT(both, mlp);
  EXPECT_LT(block, both);
  // block implies the others: nothing more to share.
  EXPECT_EQ(bytes("block,gelu,norm,mlp"), block);
}

TEST(Gpt2Recompute, NamesParseAndBadOnesAreRefused) {
  EXPECT_TRUE(parse_recompute("none").none());
  EXPECT_EQ(recompute_name(parse_recompute("mlp,norm")), "norm,mlp");
  EXPECT_EQ(recompute_name(parse_recompute("block")), "block");
  EXPECT_EQ(recompute_name(parse_recompute("norm,gelu")), "gelu,norm");
  for (const char* bad : {"", "gelus", "norm,", "none,mlp", "norm,,mlp"}) {
    try {
      parse_recompute(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("recompute"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace mptrain
