// BERT in mixed precision against itself in fp32, and Sophia's sampled pass: the activation
// plan's dtypes (bf16 roughly halves what is saved), the weight-copy refresh contract, gradient
// accumulation (+=), each precision's losses and gradients close to fp32's with no NaN, the fp32
// policy on the original code path, and forward_backward_sampled (reproducible per (seed,
// counter), labels in the real vocabulary, finite gradients a Sophia Hessian update takes).
//
// Tolerances (2 layers, C=64, 4 heads, T=19 with padding; measured margins are several times
// smaller):
//   precision   |loss - fp32| / fp32   min per-parameter gradient cosine vs fp32
//   tf32        2e-3                    0.999   (10-bit mantissa products)
//   bf16        1e-2                    0.99    (8-bit mantissa operands and stored activations)
//   fp16        3e-3                    0.999   (11-bit mantissa; values stay far from 65504)
// attention.self.key.bias is left out of the cosines: its true gradient is exactly 0 (a constant
// added to a softmax row's scores changes nothing), so its direction is rounding noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cpu/cpu_backend.h"
#include "common/grads_ready_log.h"
#include "common/host_backend.h"
#include "common/test_util.h"
#include "model/bert.h"
#include "optim/sophia.h"
#include "precision/policy.h"

namespace mptrain {
namespace {

struct Case {
  BertConfig config;
  int B = 3, T = 19;
  std::vector<int> ids, types, mask, mlm, nsp;
  BertInputs inputs() const { return {ids.data(), types.data(), mask.data(), mlm.data(), nsp.data()}; }
};

// [CLS] A [SEP] B [SEP] then 0, 3 and 7 [PAD]s; about a sixth of the real tokens masked.
Case make_case() {
  Case c;
  c.config.n_layer = 2;
  c.config.n_head = 4;
  c.config.hidden = 64;
  c.config.intermediate = 96;
  c.config.vocab_size = 101;
  c.config.padded_vocab_size = 128;
  c.config.max_position = 24;
  const int pads[] = {0, 3, 7};
  for (int b = 0; b < c.B; ++b) {
    const int len = c.T - pads[b], split = len / 2;
    for (int t = 0; t < c.T; ++t) {
      int id = 5 + (b * 31 + t * 17) % (c.config.vocab_size - 5), type = t > split ? 1 : 0, label = -1;
      if (t == 0) id = 2;
      if (t == split || t == len - 1) id = 3;
      if (t >= len) id = 0, type = 0;
      if (t < len && id != 2 && id != 3 && (b * 7 + t) % 6 == 1) {
        label = id;
        id = 4;
      }
      c.ids.push_back(id);
      c.types.push_back(type);
      c.mask.push_back(t < len ? 1 : 0);
      c.mlm.push_back(label);
    }
  }
  c.nsp = {0, 1, 1};
  return c;
}

struct Result {
  BertStats stats;
  std::vector<float> grads;
};

// The CPU backend, and its capabilities (whether oneDNN multiplies fp16 here).
const Backend& this_backend() { return host_backend(); }
BackendCaps this_cpu() { return this_backend().caps(); }

Result run(const Case& k, const Policy& policy, uint64_t seed = 7) {
  cpu::Context ctx;
  Bert model(k.config, cpu_backend(ctx), policy);
  model.init_weights(seed);
  model.plan(k.B, k.T);
  model.zero_grad();
  const BertStats st = model.forward_backward(k.inputs(), k.B, k.T, 1.0f);
  return {st, std::vector<float>(model.grads().data(), model.grads().data() + model.num_params())};
}

void expect_close(const Case& k, const Result& ours, const Result& ref, double loss_tol, double min_cos,
                  const std::string& what) {
  ASSERT_TRUE(std::isfinite(ours.stats.loss())) << what;
  EXPECT_EQ(ours.stats.mlm_count, ref.stats.mlm_count) << what;
  EXPECT_LT(std::fabs(ours.stats.mlm_loss - ref.stats.mlm_loss) / ref.stats.mlm_loss, loss_tol)
      << what << ": MLM " << ours.stats.mlm_loss << " vs " << ref.stats.mlm_loss;
  EXPECT_LT(std::fabs(ours.stats.nsp_loss - ref.stats.nsp_loss) / ref.stats.nsp_loss, loss_tol)
      << what << ": NSP " << ours.stats.nsp_loss << " vs " << ref.stats.nsp_loss;
  for (float g : ours.grads) ASSERT_TRUE(std::isfinite(g)) << what << ": non-finite gradient";
  double worst = 1.0;
  const ParamTable table = bert_param_table(k.config);
  for (const ParamSpec& spec : table.specs()) {
    if (spec.name.ends_with("attention.self.key.bias")) continue;
    const double c =
        testing::cosine(ours.grads.data() + spec.offset, ref.grads.data() + spec.offset, spec.hf_numel());
    worst = std::min(worst, c);
    EXPECT_GT(c, min_cos) << what << ": " << spec.name;
    for (size_t i = spec.hf_numel(); i < spec.numel; ++i)  // padded vocabulary rows stay exactly 0
      ASSERT_EQ(ours.grads[spec.offset + i], 0.0f) << what << ": " << spec.name << " padded element " << i;
  }
  std::printf("[bert %s vs fp32] loss %.3g relative, worst gradient cosine %.6f\n", what.c_str(),
              std::fabs(ours.stats.loss() - ref.stats.loss()) / ref.stats.loss(), worst);
}

size_t saved_bytes_ending(const ActivationPlan& p, const std::string& suffix) {
  size_t sum = 0;
  for (const auto& e : p.entries())
    if (e.role == ActivationPlan::Role::Saved && e.name.ends_with(suffix)) sum += e.bytes();
  return sum;
}

TEST(BertMixed, ActivationPlanStoresGemmInputsInBf16) {
  const Case k = make_case();
  const int M = 12;
  const ActivationPlan f =
      bert_activation_plan(k.config, make_policy(Precision::Fp32), this_backend(), k.B, k.T, M);
  const ActivationPlan h =
      bert_activation_plan(k.config, make_policy(Precision::Bf16), this_backend(), k.B, k.T, M);
  // What feeds a GEMM is stored bf16 (exactly half); the residual sums and logits stay fp32.
  for (const char* name : {"emb_ln", ".qkv", ".att", ".atty", ".ln1", ".fch", ".fch_gelu", ".ln2", "cls_in",
                           "pooled", "mlm_in", "mlm_t", "mlm_tg", "mlm_tl"}) {
    ASSERT_GT(saved_bytes_ending(f, name), 0u) << name;
    EXPECT_EQ(saved_bytes_ending(h, name) * 2, saved_bytes_ending(f, name)) << name;
  }
  for (const char* name : {".res1", ".res2", "emb", "mlm_logits"})
    EXPECT_EQ(saved_bytes_ending(h, name), saved_bytes_ending(f, name)) << name;
  const double ratio = static_cast<double>(h.bytes(ActivationPlan::Role::Saved)) /
                       static_cast<double>(f.bytes(ActivationPlan::Role::Saved));
  std::printf("[bert plan] saved activations bf16/fp32 = %.3f\n", ratio);
  EXPECT_LT(ratio, 0.65) << "saved activations should roughly halve";
  EXPECT_GT(ratio, 0.4);
  // The model allocates exactly the plan explain reports, and the weight copies it predicts.
  cpu::Context ctx;
  Bert model(k.config, cpu_backend(ctx), Precision::Bf16);
  model.plan(k.B, k.T, M);
  EXPECT_EQ(model.activation_bytes(), h.total_bytes());
  EXPECT_EQ(model.weight_copy_bytes(), bert_weight_copy_bytes(k.config, make_policy(Precision::Bf16)));
  // Every GEMM weight once in bf16: the encoder linears, pooler, MLM transform, NSP, word embeddings.
  size_t gemm_numel = 0;
  for (const ParamSpec& s : model.table().specs())
    if (bert_gemm_reader(s) != GemmReader::None) gemm_numel += s.numel;
  EXPECT_GE(model.weight_copy_bytes(), 2 * gemm_numel);
  EXPECT_LT(model.weight_copy_bytes(), 2 * gemm_numel + 64 * model.table().specs().size());
  Bert m32(k.config, cpu_backend(ctx));
  m32.plan(k.B, k.T, M);
  EXPECT_EQ(m32.activation_bytes(), f.total_bytes());
  EXPECT_EQ(m32.weight_copy_bytes(), 0u);
  EXPECT_EQ(m32.precision(), Precision::Fp32);
  EXPECT_EQ(model.precision(), Precision::Bf16);
  EXPECT_EQ(model.policy().rule(OpRole::Linear).compute, ComputeType::BF16);
}

TEST(BertMixed, WeightCopiesAreRefreshedAfterParamsChange) {
  const Case k = make_case();
  cpu::Context ctx;
  for (Precision p : {Precision::Bf16, Precision::Tf32, Precision::Fp16}) {
    Bert a(k.config, cpu_backend(ctx), p), b(k.config, cpu_backend(ctx), p);
    a.init_weights(1);
    b.init_weights(2);
    a.plan(k.B, k.T);
    b.plan(k.B, k.T);
    const float la = a.forward(k.inputs(), k.B, k.T).loss();
    const float lb = b.forward(k.inputs(), k.B, k.T).loss();
    ASSERT_NE(la, lb);
    // Write b's parameters into a through params(): a's next forward must use them.
    std::copy(b.params().data(), b.params().data() + b.num_params(), a.params().data());
    EXPECT_EQ(a.forward(k.inputs(), k.B, k.T).loss(), lb) << precision_name(p);
    // An optimizer-like in-place update through a fresh params() call is seen too.
    float* w = a.params().data();
    for (size_t i = 0; i < a.num_params(); ++i) w[i] *= 0.5f;
    EXPECT_NE(a.forward(k.inputs(), k.B, k.T).loss(), lb) << precision_name(p);
  }
}

TEST(BertMixed, GradientsAccumulate) {
  const Case k = make_case();
  cpu::Context ctx;
  Bert m(k.config, cpu_backend(ctx), Precision::Bf16);
  m.init_weights(3);
  m.plan(k.B, k.T);
  m.zero_grad();
  m.forward_backward(k.inputs(), k.B, k.T, 1.0f);
  const std::vector<float> once(m.grads().data(), m.grads().data() + m.num_params());
  m.forward_backward(k.inputs(), k.B, k.T, 1.0f);
  std::vector<float> twice(once.size());
  for (size_t i = 0; i < once.size(); ++i) twice[i] = 2.0f * once[i];
  EXPECT_LT(testing::relative_error(m.grads().data(), twice.data(), twice.size()), 1e-6);
}

TEST(BertMixed, EachPrecisionIsCloseToFp32) {
  const Case k = make_case();
  const Result ref = run(k, make_policy(Precision::Fp32));
  ASSERT_TRUE(std::isfinite(ref.stats.loss()));
  ASSERT_GT(ref.stats.mlm_count, 3);
  expect_close(k, run(k, make_policy(Precision::Tf32)), ref, 2e-3, 0.999, "tf32");
  expect_close(k, run(k, make_policy(Precision::Bf16)), ref, 1e-2, 0.99, "bf16");
  expect_close(k, run(k, make_policy(Precision::Fp16, {}, this_cpu())), ref, 3e-3, 0.999, "fp16");
  expect_close(k, run(k, make_policy(Precision::Fp32, parse_op_precision({"gelu=bf16"}))), ref, 1e-3, 0.999,
               "fp32 + gelu=bf16");
}

// The GPU's plan (kCudaCaps: 16-bit stream, logits, gradients, small weights) on the CPU
// backend: a little farther from fp32 than the CPU's plan, and not the CPU's plan renamed.
TEST(BertMixed, GpuPlanIsCloseToFp32) {
  const Case k = make_case();
  const Result ref = run(k, make_policy(Precision::Fp32));
  const Result bf16 = run(k, make_policy(Precision::Bf16, {}, kCudaCaps));
  expect_close(k, bf16, ref, 2e-2, 0.98, "bf16 GPU plan");
  expect_close(k, run(k, make_policy(Precision::Fp16, {}, kCudaCaps)), ref, 5e-3, 0.995, "fp16 GPU plan");
  const Result cpu = run(k, make_policy(Precision::Bf16));
  EXPECT_GT(testing::relative_error(bf16.grads.data(), cpu.grads.data(), cpu.grads.size()), 1e-4);
}

// The gradient-ready hook hands each range once per micro-batch, each final when handed: the heads
// (pooler, cls.*), the layers from the last, then the embeddings (the word table is also the
// MLM decoder's, so it is final last).
TEST(BertMixed, GradsReadyHookHandsEachRangeOnceAndFinal) {
  const Case k = make_case();
  cpu::Context ctx;
  for (const BackendCaps caps : {BackendCaps{}, kCudaCaps}) {
    Bert m(k.config, cpu_backend(ctx), make_policy(Precision::Bf16, {}, caps));
    m.init_weights(3);
    m.plan(k.B, k.T);
    const ParamTable& t = m.table();
    std::vector<ParamRange> order = {t.range("bert.pooler."), t.range("cls.")};
    for (int l = k.config.n_layer - 1; l >= 0; --l)
      order.push_back(t.range("bert.encoder.layer." + std::to_string(l) + "."));
    order.push_back({0, t.range("bert.encoder.layer.0.").begin});  // the embeddings, last
    test::expect_grads_ready_in_order(m, order, caps.lowp_between_ops ? "GPU plan" : "CPU plan",
                                      [&] { m.forward_backward(k.inputs(), k.B, k.T, 0.5f); });
  }
}

TEST(BertMixed, Fp32PolicyTakesTheOriginalPath) {
  const Case k = make_case();
  const Result a = run(k, make_policy(Precision::Fp32));
  cpu::Context ctx;
  Bert m(k.config, cpu_backend(ctx));  // the constructor every existing caller uses
  m.init_weights(7);
  m.plan(k.B, k.T);
  m.zero_grad();
  EXPECT_EQ(m.forward_backward(k.inputs(), k.B, k.T, 1.0f).loss(), a.stats.loss());
  for (size_t i = 0; i < a.grads.size(); ++i) ASSERT_EQ(m.grads()[i], a.grads[i]) << i;
}

TEST(BertSampled, ReproducibleLabelsInTheVocabularyAndASophiaStep) {
  const Case k = make_case();
  cpu::Context ctx;
  for (Precision p : {Precision::Fp32, Precision::Bf16}) {
    const std::string what = precision_name(p);
    Bert m(k.config, cpu_backend(ctx), p);
    m.init_weights(5);
    m.plan(k.B, k.T);
    auto sampled = [&](uint64_t counter) {
      m.zero_grad();
      const BertStats st = m.forward_backward_sampled(k.inputs(), k.B, k.T, 1.0f, 1234, counter);
      return std::make_tuple(st, m.sampled_mlm_labels(), m.sampled_nsp_labels(),
                             std::vector<float>(m.grads().data(), m.grads().data() + m.num_params()));
    };
    const auto [st1, mlm1, nsp1, g1] = sampled(3);
    const auto [st2, mlm2, nsp2, g2] = sampled(3);
    const auto [st3, mlm3, nsp3, g3] = sampled(4);
    ASSERT_EQ(static_cast<int>(mlm1.size()), st1.mlm_count) << what;
    ASSERT_GT(st1.mlm_count, 3) << what;
    ASSERT_EQ(static_cast<int>(nsp1.size()), k.B) << what;
    // Same (seed, counter): the same labels, losses and gradients, bit for bit.
    EXPECT_EQ(mlm1, mlm2) << what;
    EXPECT_EQ(nsp1, nsp2) << what;
    EXPECT_EQ(st1.loss(), st2.loss()) << what;
    EXPECT_EQ(g1, g2) << what;
    // Another counter: other draws (the model is near uniform over 101 tokens at init).
    EXPECT_NE(mlm1, mlm3) << what;
    for (int y : mlm1) EXPECT_TRUE(y >= 0 && y < k.config.vocab_size) << what << ": label " << y;
    for (int y : nsp1) EXPECT_TRUE(y == 0 || y == 1) << what << ": NSP label " << y;
    EXPECT_TRUE(std::isfinite(st1.loss()) && st1.mlm_loss > 0 && st1.nsp_loss > 0) << what;
    double norm = 0;
    for (float g : g1) {
      ASSERT_TRUE(std::isfinite(g)) << what;
      norm += static_cast<double>(g) * g;
    }
    EXPECT_GT(norm, 0.0) << what;
    // The sampled gradient differs from the true-label one (other labels, same model).
    m.zero_grad();
    m.forward_backward(k.inputs(), k.B, k.T, 1.0f);
    EXPECT_NE(std::vector<float>(m.grads().data(), m.grads().data() + m.num_params()), g1) << what;

    // Sophia: h = EMA of g², then a step on finite values that moves the parameters.
    Sophia opt(m.table(), SophiaHyper{}, 3.0 * k.T, 1234, m.backend());
    opt.update_curvature(g1.data());
    double hsum = 0;
    for (size_t i = 0; i < m.num_params(); ++i) {
      ASSERT_TRUE(std::isfinite(opt.h()[i]) && opt.h()[i] >= 0.0f) << what;
      hsum += opt.h()[i];
    }
    EXPECT_GT(hsum, 0.0) << what;
    const std::vector<float> before(m.params().data(), m.params().data() + m.num_params());
    m.zero_grad();
    m.forward_backward(k.inputs(), k.B, k.T, 1.0f);
    opt.step(m.params().data(), m.grads().data(), 1e-3f, 1);
    size_t moved = 0;
    for (size_t i = 0; i < m.num_params(); ++i) {
      ASSERT_TRUE(std::isfinite(m.params()[i])) << what;
      moved += m.params()[i] != before[i];
    }
    EXPECT_GT(moved, m.num_params() / 2) << what;
    // The step went through params(): the next forward sees it (the copies were refreshed).
    EXPECT_TRUE(std::isfinite(m.forward(k.inputs(), k.B, k.T).loss())) << what;
  }
}

// `mptrain explain` for a BERT preset: the same table and totals as GPT-2's, from BERT's own
// plan (a bf16 run saves less and has weight copies; an fp32 one has none).
TEST(BertExplain, PrintsBertsPlanAndTotals) {
  const auto h = testing::run_mptrain("explain --preset bert-tiny --precision bf16 --batch 4 --seq 32");
  ASSERT_EQ(h.exit_code, 0) << h.output;
  for (const char* s : {"preset bert-tiny", "masked positions per sequence", "MLM decoder", "layernorm",
                        "softmax", "GEMM weight copies", "activations saved for backward", "total"})
    EXPECT_NE(h.output.find(s), std::string::npos) << s << " in:\n" << h.output;
  const auto f = testing::run_mptrain("explain --preset bert-tiny --precision fp32 --batch 4 --seq 32");
  ASSERT_EQ(f.exit_code, 0) << f.output;
  EXPECT_NE(f.output.find("none (fp32 GEMMs)"), std::string::npos) << f.output;
  // The saved-activation line is the plan's own number: compare it with bert_activation_plan.
  const BertConfig tiny = bert_preset("bert-tiny");
  const ActivationPlan plan =
      bert_activation_plan(tiny, make_policy(Precision::Bf16), this_backend(), 4, 32, 4 * 20);
  char want[64];
  std::snprintf(want, sizeof(want), "%.1f MiB", plan.bytes(ActivationPlan::Role::Saved) / (1024.0 * 1024.0));
  const size_t line = h.output.find("activations saved for backward");
  ASSERT_NE(line, std::string::npos);
  EXPECT_NE(h.output.substr(line, h.output.find('\n', line) - line).find(want), std::string::npos)
      << want << " in:\n"
      << h.output;
  testing::expect_clear_error(testing::run_mptrain("explain --preset bert-huge"),
                              "unknown BERT preset 'bert-huge'");
}

}  // namespace
}  // namespace mptrain
