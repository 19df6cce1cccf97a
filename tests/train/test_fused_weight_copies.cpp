// AdamW writes the GEMM weight copies in its own pass (train/step.cpp update_weights, AdamWArgs::copy):
// the steps, the weights and the copies the next forward reads are the bits of the unfused step,
// which leaves the copies stale for the forward's refresh: in every precision with copies, under
// the CPU's plan and the GPU's (whose small weights' rounded copies stay for the refresh).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cpu/cpu_backend.h"
#include "common/host_backend.h"
#include "common/tiny_gpt2.h"
#include "model/gpt2.h"
#include "optim/adamw.h"
#include "optim/sophia.h"
#include "precision/policy.h"
#include "train/step.h"

namespace mptrain {
namespace {

constexpr int kB = 2, kT = 16, kSteps = 3;

struct Outcome {
  std::vector<StepStats> stats;
  std::vector<float> params;
  std::vector<std::vector<char>> copies;  // each GEMM weight's copy as the next forward reads it
  bool operands_fresh = false;            // after the last update, before any forward
};

// kSteps steps; `fused`: the step model hands the update the model's weight copies.
Outcome run(Precision p, bool gpu_plan, bool sophia, bool fused) {
  const Policy policy = make_policy(p, {}, gpu_plan ? kCudaCaps : cpu::CpuBackend(host_context()).caps());
  Gpt2 model(test::tiny_gpt2_config(), std::make_unique<cpu::CpuBackend>(host_context()), policy);
  model.init_weights(7);
  model.plan(kB, kT);
  std::unique_ptr<Optimizer> opt;
  if (sophia)
    opt = std::make_unique<Sophia>(model.table(), SophiaHyper{}, 64.0, 11, model.backend());
  else
    opt = std::make_unique<AdamW>(model.table(), AdamWHyper{}, model.backend());
  int draw = 0;
  std::vector<int> in(kB * kT), tg(kB * kT);
  StepModel step = causal_lm_step_model(
      model,
      [&](int* x, int* y) {
        for (int i = 0; i < kB * kT; ++i) x[i] = (i * 7 + draw * 13) % 61, y[i] = (i * 11 + draw * 3 + 1) % 61;
        ++draw;
      },
      kB, kT, in.data(), tg.data());
  if (!fused) step.copies = nullptr;
  Outcome r;
  for (int t = 1; t <= kSteps; ++t) r.stats.push_back(train_step(step, *opt, 1, 1e-3f, 1.0f, t));
  WeightCopies& copies = model.weight_copies();
  r.operands_fresh = !copies.operands_stale();
  copies.refresh_if_stale(model.params().data(), model.backend());
  const FloatBuffer& params = static_cast<const Gpt2&>(model).params();
  for (const ParamSpec& spec : model.table().specs()) {
    const WeightRef w = copies.ref(model.table(), spec.name, params.data());
    const char* b = static_cast<const char*>(w.ptr);
    r.copies.emplace_back(b, b + spec.numel * storage_bytes(w.type));
  }
  r.params.assign(params.data(), params.data() + params.size());
  return r;
}

struct Case {
  Precision precision;
  bool gpu_plan, sophia, fuses;  // fuses: the update writes the copies
};

TEST(FusedWeightCopies, TheUpdateWritesTheCopiesTheRefreshWouldWithTheSameBits) {
  const Case cases[] = {
      {Precision::Bf16, false, false, true}, {Precision::Fp16, false, false, true},
      {Precision::Tf32, false, false, true}, {Precision::Bf16, true, false, true},
      {Precision::Fp32, false, false, true},  // no copies: nothing to write, nothing stale
      {Precision::Bf16, false, true, false},  // Sophia fuses none: the forward refreshes
  };
  for (const Case& c : cases) {
    const std::string what = std::string(precision_name(c.precision)) + (c.gpu_plan ? " (GPU plan)" : "") +
                             (c.sophia ? ", Sophia" : ", AdamW");
    const Outcome fused = run(c.precision, c.gpu_plan, c.sophia, true);
    const Outcome plain = run(c.precision, c.gpu_plan, c.sophia, false);
    EXPECT_EQ(fused.operands_fresh, c.fuses) << what;
    EXPECT_FALSE(plain.operands_fresh) << what << ": the unfused update left the copies fresh";
    ASSERT_EQ(fused.stats.size(), plain.stats.size());
    for (size_t i = 0; i < plain.stats.size(); ++i) {
      EXPECT_EQ(fused.stats[i].loss, plain.stats[i].loss) << what << ", step " << i + 1;
      EXPECT_EQ(fused.stats[i].grad_norm, plain.stats[i].grad_norm) << what << ", step " << i + 1;
    }
    EXPECT_EQ(std::memcmp(fused.params.data(), plain.params.data(), plain.params.size() * sizeof(float)), 0)
        << what << ": the weights differ";
    ASSERT_EQ(fused.copies.size(), plain.copies.size());
    for (size_t s = 0; s < plain.copies.size(); ++s)
      EXPECT_EQ(fused.copies[s], plain.copies[s]) << what << ": copy of tensor " << s << " differs";
  }
}

}  // namespace
}  // namespace mptrain
