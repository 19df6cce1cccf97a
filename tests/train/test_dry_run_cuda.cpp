// The GPU's refusals found without a GPU: every family's forward, backward and optimizer step, as
// the trainer runs them on `--device cuda`, against a backend that answers every question as the
// CUDA backend does (its capability check, the attention's memory, the operand types, the fusions:
// make_cuda_sizing_backend) but keeps its tensors in host memory and runs no kernel. Each op call
// still goes through the op interface's checks and the CUDA backend's supports(), so a combination
// the GPU would refuse fails here, in CPU CI, not in a GPU window. Every family (GPT-2, BERT) ×
// precision × optimizer × batch layout (GPT-2 eager and replayed from graphs, BERT padded and
// packed), under the GPU's plan (kCudaCaps), as the trainer builds it. Skipped (reported so) where
// the build has no CUDA backend.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/backend.h"
#include "backend/device.h"
#include "core/buffer.h"
#include "model/bert.h"
#include "model/gpt2.h"
#include "optim/make_optimizer.h"
#include "precision/loss_scaler.h"
#include "precision/policy.h"
#include "train/step.h"

namespace mptrain {
namespace {

// The CUDA backend's answers, host memory, no kernels; counts the ops it was asked to run.
class DryRunCuda final : public Backend {
 public:
  DryRunCuda() : gpu_(make_cuda_sizing_backend()) {}
  const char* name() const override { return "cuda"; }  // a refusal reads as the GPU's own
  BackendCaps caps() const override { return gpu_->caps(); }
  AttentionBytes attention_bytes(int B, int T, int C, int NH, const AttentionDtypes& t) const override {
    return gpu_->attention_bytes(B, T, C, NH, t);
  }
  bool linear_uses_scratch() const override { return gpu_->linear_uses_scratch(); }
  MemoryResource& memory() override { return host_memory(); }
  const std::set<std::string>& ops() const { return ops_; }

 protected:
  bool can_run(const OpTypes& t) const override { return gpu_->supports(t); }
  void run_zero(const View&) override { ops_.insert("zero"); }
  // Every op recorded by name; what it answers the host is a harmless constant.
#define MPTRAIN_DRY_RUN(A)                  \
  op_result_t<A> run(const A& a) override { \
    ops_.insert(backend_op_name(a.op()));   \
    return answer(a);                       \
  }
  MPTRAIN_OP_ARGS(MPTRAIN_DRY_RUN)
#undef MPTRAIN_DRY_RUN

 private:
  template <class A>
  static op_result_t<A> answer(const A&) {
    if constexpr (!std::is_void_v<op_result_t<A>>) return op_result_t<A>{};
  }
  static void answer(const ArgmaxRowsArgs& a) {
    int* best = a.best.as<int>();
    for (std::int64_t r = 0; r < a.best.numel(); ++r) best[r] = 0;
  }
  static double answer(const SumSquaresArgs&) { return 1.0; }
  std::unique_ptr<Backend> gpu_;
  std::set<std::string> ops_;
};

constexpr Precision kPrecisions[] = {Precision::Fp32, Precision::Tf32, Precision::Bf16, Precision::Fp16};
constexpr OptimizerKind kOptimizers[] = {OptimizerKind::AdamW, OptimizerKind::Sophia, OptimizerKind::Muon};
constexpr int kSteps = 2, kAccum = 2;

// The optimizer as the trainer builds it (Sophia with a curvature pass every step, Muon's
// Newton–Schulz in the policy's arithmetic).
std::unique_ptr<Optimizer> optimizer_for(OptimizerKind kind, const Policy& policy, const ParamTable& table,
                                         Backend& be) {
  SophiaHyper sophia;
  sophia.k = 1;
  MuonHyper muon;
  muon.ns_math = policy.rule(OpRole::NewtonSchulz).compute;
  return make_optimizer(kind, table, AdamWHyper{}, sophia, 256.0, 7, be, muon);
}

// Every op of `want` among those the dry runs reached (so no op of the step escaped the GPU's
// capability check); prints what was reached.
void expect_reached(const std::set<std::string>& reached, const std::set<std::string>& want,
                    const char* family) {
  std::string missing, all;
  for (const std::string& op : want)
    if (!reached.count(op)) missing += " " + op;
  for (const std::string& op : reached) all += " " + op;
  EXPECT_TRUE(missing.empty()) << family << ": ops no dry run reached:" << missing;
  std::printf("[ dry run ] %s: %zu ops through the CUDA backend's capability check:%s\n", family,
              reached.size(), all.c_str());
}

// The ops every family's step asks for, and each family's own.
const std::set<std::string> kStepOps = {"zero",
                                        "to_operand",
                                        "linear",
                                        "linear_activation",
                                        "linear_residual",
                                        "linear_backward",
                                        "linear_activation_backward",
                                        "layernorm",
                                        "layernorm_backward",
                                        "attention",
                                        "attention_backward",
                                        "cross_entropy",
                                        "sampled_cross_entropy",
                                        "embedding",
                                        "embedding_backward",
                                        "adamw",
                                        "sophia",
                                        "sophia_hessian",
                                        "count_unclipped",
                                        "unscale_and_check",
                                        "sum_squares",
                                        "scale",
                                        "matmul",
                                        "cast",
                                        "muon_momentum",
                                        "muon_update",
                                        "accumulate"};

class DryRunOnCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_compiled())
      GTEST_SKIP() << "this build has no CUDA backend (configure with CUDA to dry-run it)";
  }
};

TEST_F(DryRunOnCuda, Gpt2StepsInEveryPrecisionOptimizerAndLayout) {
  Gpt2Config c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 128;  // head size 64: the flash attention's memory plan
  c.vocab_size = 61;
  c.padded_vocab_size = 64;
  c.block_size = 32;
  const int B = 2, T = 32;
  int cases = 0;
  std::set<std::string> reached;
  for (const Precision p : kPrecisions)
    for (const OptimizerKind o : kOptimizers)
      for (const bool graphs : {false, true}) {
        const std::string what = std::string("GPT-2 ") + precision_name(p) + " " + optimizer_name(o) +
                                 (graphs ? " graphs" : " eager");
        SCOPED_TRACE(what);
        auto owned = std::make_unique<DryRunCuda>();
        DryRunCuda& be = *owned;
        const Policy policy = make_policy(p, {}, kCudaCaps);
        Gpt2 model(c, std::move(owned), policy);  // check_policy_supported: the GPU's refusals at build
        model.init_weights(3);
        model.plan(B, T);
        model.set_graphs(graphs);
        const std::unique_ptr<Optimizer> opt = optimizer_for(o, policy, model.table(), model.backend());
        LossScaler scaler;
        std::vector<int> in(B * T), tg(B * T);
        const auto batch = [&](int* x, int* y) {
          for (int i = 0; i < B * T; ++i) x[i] = i % 61, y[i] = (i * 7 + 1) % 61;
        };
        for (int t = 1; t <= kSteps; ++t)
          ASSERT_NO_THROW(train_step(model, *opt, batch, B, T, kAccum, 1e-3f, 1.0f, t, in.data(), tg.data(),
                                     p == Precision::Fp16 ? &scaler : nullptr));
        reached.insert(be.ops().begin(), be.ops().end());
        ++cases;
      }
  EXPECT_EQ(cases, 4 * 3 * 2);
  expect_reached(reached, kStepOps, "GPT-2");
}

// BERT's batch: [CLS] A [SEP] B [SEP] then padding (3 rows of 4 padded), a few tokens masked.
struct BertBatch {
  std::vector<int> ids, types, mask, mlm, nsp, cu;
  BertInputs inputs(bool packed) const {
    return {ids.data(), types.data(), packed ? nullptr : mask.data(),
            mlm.data(), nsp.data(),   packed ? cu.data() : nullptr};
  }
};

BertBatch bert_batch(int B, int T, bool packed) {
  BertBatch k;
  k.cu.push_back(0);
  for (int b = 0; b < B; ++b) {
    const int len = T - (b % 4) * 5, split = len / 2;
    for (int t = 0; t < (packed ? len : T); ++t) {
      int id = 5 + (b * 31 + t * 17) % 50, type = t > split ? 1 : 0, label = -1;
      if (t == 0) id = 2;
      if (t == split || t == len - 1) id = 3;
      if (t >= len) id = 0, type = 0;
      if (t < len && id != 2 && id != 3 && (b * 7 + t) % 4 == 1) label = id, id = 4;
      k.ids.push_back(id);
      k.types.push_back(type);
      k.mask.push_back(t < len ? 1 : 0);
      k.mlm.push_back(label);
    }
    k.cu.push_back(k.cu.back() + len);
    k.nsp.push_back(b % 2);
  }
  return k;
}

TEST_F(DryRunOnCuda, BertStepsInEveryPrecisionOptimizerAndLayout) {
  BertConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.hidden = 128;  // head size 64: flash attention's padded and packed forms
  c.intermediate = 256;
  c.vocab_size = 61;
  c.padded_vocab_size = 64;
  c.max_position = 32;
  const int B = 4, T = 32;
  int cases = 0;
  std::set<std::string> reached;
  for (const Precision p : kPrecisions)
    for (const OptimizerKind o : kOptimizers)
      for (const bool packed : {false, true}) {
        const std::string what = std::string("BERT ") + precision_name(p) + " " + optimizer_name(o) +
                                 (packed ? " packed" : " padded");
        SCOPED_TRACE(what);
        auto owned = std::make_unique<DryRunCuda>();
        DryRunCuda& be = *owned;
        const Policy policy = make_policy(p, {}, kCudaCaps);
        Bert model(c, std::move(owned), policy);
        model.init_weights(3);
        model.plan(B, T);
        const std::unique_ptr<Optimizer> opt = optimizer_for(o, policy, model.table(), model.backend());
        const BertBatch batch = bert_batch(B, T, packed);
        StepModel m;
        m.table = &model.table();
        m.params = [&model]() -> FloatBuffer& { return model.params(); };
        m.grads = &model.grads();
        m.micro_step = [&](float grad_scale) {
          return model.forward_backward(batch.inputs(packed), B, T, grad_scale).loss();
        };
        m.curvature = [&](float grad_scale, uint64_t seed, uint64_t counter) {
          return model.forward_backward_sampled(batch.inputs(packed), B, T, grad_scale, seed, counter).loss();
        };
        LossScaler scaler;
        for (int t = 1; t <= kSteps; ++t)
          ASSERT_NO_THROW(train_step(m, *opt, kAccum, 1e-3f, 1.0f, t,
                                     p == Precision::Fp16 ? &scaler : nullptr, nullptr, false));
        reached.insert(be.ops().begin(), be.ops().end());
        ++cases;
      }
  EXPECT_EQ(cases, 4 * 3 * 2);
  std::set<std::string> bert_ops = kStepOps;
  bert_ops.insert({"gather_rows", "scatter_add_rows"});  // the heads' rows
  expect_reached(reached, bert_ops, "BERT");
}

}  // namespace
}  // namespace mptrain
