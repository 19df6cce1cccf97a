// GPT-2 in mixed precision against itself in fp32: the activation plan's dtypes (bf16 halves
// what feeds the GEMMs), the weight-copy refresh contract, gradient accumulation (+=), and each
// precision's loss and gradients close to fp32's with no NaN.
//
// Tolerances (this model: 2 layers, C=64, T=32; measured margins are several times smaller):
//   precision   |loss - fp32| / fp32   min per-parameter gradient cosine vs fp32
//   tf32        2e-3                    0.999   (10-bit mantissa products)
//   bf16        1e-2                    0.99    (8-bit mantissa operands and stored activations)
//   fp16        3e-3                    0.999   (11-bit mantissa; values stay far from 65504)
//   fp32 + gelu=bf16 (the mixed code path, one op rounded)   1e-3, 0.999
//   the GPU's plan (kCudaCaps: 16-bit stream, logits, gradients): bf16 2e-2, 0.98; fp16 5e-3, 0.995
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cpu/cpu_backend.h"
#include "common/grads_ready_log.h"
#include "common/host_backend.h"
#include "common/test_util.h"
#include "core/error.h"
#include "model/gpt2.h"
#include "precision/policy.h"

namespace mptrain {
namespace {

struct Batch {
  Gpt2Config config;
  int B = 4, T = 32;
  std::vector<int> inputs, targets;
};

Batch make_batch() {
  Batch k;
  k.config.n_layer = 2;
  k.config.n_head = 4;
  k.config.n_embd = 64;
  k.config.vocab_size = 101;
  k.config.padded_vocab_size = pad_vocab(101, 64);
  k.config.block_size = 32;
  uint64_t s = 12345;
  for (int i = 0; i < k.B * k.T; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    k.inputs.push_back(static_cast<int>((s >> 33) % k.config.vocab_size));
  }
  for (int i = 0; i < k.B * k.T; ++i) k.targets.push_back(k.inputs[(i + 1) % (k.B * k.T)]);
  return k;
}

struct Result {
  float loss;
  std::vector<float> grads;
};

// The CPU backend, and its capabilities (whether oneDNN multiplies fp16 here).
const Backend& this_backend() { return host_backend(); }
BackendCaps this_cpu() { return this_backend().caps(); }

Result run(const Batch& k, const Policy& policy, uint64_t seed = 7) {
  cpu::Context ctx;
  Gpt2 model(k.config, cpu_backend(ctx), policy);
  model.init_weights(seed);
  model.plan(k.B, k.T);
  model.zero_grad();
  const float loss = model.forward_backward(k.inputs.data(), k.targets.data(), k.B, k.T, 1.0f);
  return {loss, std::vector<float>(model.grads().data(), model.grads().data() + model.num_params())};
}

void expect_close(const Batch& k, const Result& ours, const Result& ref, double loss_tol, double min_cos,
                  const std::string& what) {
  EXPECT_TRUE(std::isfinite(ours.loss)) << what;
  EXPECT_LT(std::fabs(ours.loss - ref.loss) / ref.loss, loss_tol)
      << what << ": " << ours.loss << " vs " << ref.loss;
  for (float g : ours.grads) ASSERT_TRUE(std::isfinite(g)) << what << ": non-finite gradient";
  const ParamTable table = gpt2_param_table(k.config);
  for (const ParamSpec& spec : table.specs()) {
    const double c =
        testing::cosine(ours.grads.data() + spec.offset, ref.grads.data() + spec.offset, spec.hf_numel());
    EXPECT_GT(c, min_cos) << what << ": " << spec.name;
  }
}

TEST(MixedGpt2, ActivationPlanStoresGemmInputsInBf16) {
  const Batch k = make_batch();
  const ActivationPlan f =
      gpt2_activation_plan(k.config, make_policy(Precision::Fp32), this_backend(), k.B, k.T);
  const ActivationPlan h =
      gpt2_activation_plan(k.config, make_policy(Precision::Bf16), this_backend(), k.B, k.T);
  auto bytes_of = [](const ActivationPlan& p, const std::string& suffix) {
    size_t sum = 0;
    for (const auto& e : p.entries())
      if (e.name.size() >= suffix.size() &&
          e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
          e.role == ActivationPlan::Role::Saved)
        sum += e.bytes();
    return sum;
  };
  // What feeds a GEMM is stored bf16 (exactly half); the residual stream stays fp32.
  for (const char* name : {".ln1", ".qkv", ".att", ".atty", ".ln2", ".fch", ".fch_gelu", "lnf"}) {
    ASSERT_GT(bytes_of(f, name), 0u) << name;
    EXPECT_EQ(bytes_of(h, name) * 2, bytes_of(f, name)) << name;
  }
  EXPECT_EQ(bytes_of(h, ".residual2"), bytes_of(f, ".residual2"));
  const double ratio = static_cast<double>(h.bytes(ActivationPlan::Role::Saved)) /
                       static_cast<double>(f.bytes(ActivationPlan::Role::Saved));
  EXPECT_LT(ratio, 0.6) << "saved activations should roughly halve";
  EXPECT_GT(ratio, 0.4);
  // The model allocates exactly the plan explain reports.
  cpu::Context ctx;
  Gpt2 model(k.config, cpu_backend(ctx), Precision::Bf16);
  model.plan(k.B, k.T);
  EXPECT_EQ(model.activation_bytes(), h.total_bytes());
  EXPECT_EQ(model.weight_copy_bytes(), gpt2_weight_copy_bytes(k.config, make_policy(Precision::Bf16)));
  EXPECT_GT(model.weight_copy_bytes(), 0u);
  Gpt2 m32(k.config, cpu_backend(ctx));
  m32.plan(k.B, k.T);
  EXPECT_EQ(m32.activation_bytes(), f.total_bytes());
  EXPECT_EQ(m32.weight_copy_bytes(), 0u);
}

TEST(MixedGpt2, WeightCopiesAreRefreshedAfterParamsChange) {
  const Batch k = make_batch();
  cpu::Context ctx;
  for (Precision p : {Precision::Bf16, Precision::Tf32, Precision::Fp16}) {
    Gpt2 a(k.config, cpu_backend(ctx), p), b(k.config, cpu_backend(ctx), p);
    a.init_weights(1);
    b.init_weights(2);
    a.plan(k.B, k.T);
    b.plan(k.B, k.T);
    const float la = a.forward(k.inputs.data(), k.targets.data(), k.B, k.T);
    const float lb = b.forward(k.inputs.data(), k.targets.data(), k.B, k.T);
    ASSERT_NE(la, lb);
    // Write b's parameters into a through params(): a's next forward must use them.
    std::copy(b.params().data(), b.params().data() + b.num_params(), a.params().data());
    EXPECT_EQ(a.forward(k.inputs.data(), k.targets.data(), k.B, k.T), lb) << precision_name(p);
    // An optimizer-like in-place update through a fresh params() call is seen too.
    float* w = a.params().data();
    for (size_t i = 0; i < a.num_params(); ++i) w[i] *= 0.5f;
    EXPECT_NE(a.forward(k.inputs.data(), k.targets.data(), k.B, k.T), lb) << precision_name(p);
  }
}

TEST(MixedGpt2, GradientsAccumulate) {
  const Batch k = make_batch();
  cpu::Context ctx;
  Gpt2 m(k.config, cpu_backend(ctx), Precision::Bf16);
  m.init_weights(3);
  m.plan(k.B, k.T);
  m.zero_grad();
  m.forward_backward(k.inputs.data(), k.targets.data(), k.B, k.T, 1.0f);
  const std::vector<float> once(m.grads().data(), m.grads().data() + m.num_params());
  m.forward_backward(k.inputs.data(), k.targets.data(), k.B, k.T, 1.0f);
  // (a + b) + (a + b) vs ((a + b) + a) + b: equal up to one rounding per accumulation.
  std::vector<float> twice(once.size());
  for (size_t i = 0; i < once.size(); ++i) twice[i] = 2.0f * once[i];
  EXPECT_LT(testing::relative_error(m.grads().data(), twice.data(), twice.size()), 1e-6);
}

TEST(MixedGpt2, EachPrecisionIsCloseToFp32) {
  const Batch k = make_batch();
  const Result ref = run(k, make_policy(Precision::Fp32));
  ASSERT_TRUE(std::isfinite(ref.loss));
  expect_close(k, run(k, make_policy(Precision::Tf32)), ref, 2e-3, 0.999, "tf32");
  expect_close(k, run(k, make_policy(Precision::Bf16)), ref, 1e-2, 0.99, "bf16");
  expect_close(k, run(k, make_policy(Precision::Fp16, {}, this_cpu())), ref, 3e-3, 0.999, "fp16");
  expect_close(k, run(k, make_policy(Precision::Fp32, parse_op_precision({"gelu=bf16"}))), ref, 1e-3, 0.999,
               "fp32 + gelu=bf16");
}

// A policy made for other capabilities than this CPU's runs here too: fp16 operands stored as
// fp16 (native fp16 GEMMs) hold the values this CPU's emulation holds in fp32 storage.
TEST(MixedGpt2, RunsAPolicyMadeForAnotherBackend) {
  const Batch k = make_batch();
  const Result mine = run(k, make_policy(Precision::Fp16, {}, this_cpu()));
  const Result other =
      run(k, make_policy(Precision::Fp16, {}, BackendCaps{.fp16_gemm = !this_cpu().fp16_gemm}));
  EXPECT_NEAR(other.loss, mine.loss, 1e-6 * mine.loss);
  EXPECT_LT(testing::relative_error(other.grads.data(), mine.grads.data(), mine.grads.size()), 1e-5);
}

// A backend without a LayerNorm for a 16-bit stream refuses the GPU's plan when the model is
// built, naming the op and the dtypes; the CPU's plan (an fp32 stream) passes the same check.
class NoLowpStreamLayerNorm : public cpu::CpuBackend {
 public:
  using cpu::CpuBackend::CpuBackend;

 protected:
  bool can_run(const OpTypes& t) const override {
    if (t.op == Op::LayerNorm && t["x"] != StorageType::F32) return false;
    return cpu::CpuBackend::can_run(t);
  }
};

TEST(MixedGpt2, APolicyTheBackendCannotRunIsRefusedNamingTheOp) {
  cpu::Context ctx;
  const NoLowpStreamLayerNorm be(ctx);
  testing::expect_error([&] { check_policy_supported(make_policy(Precision::Bf16, {}, kCudaCaps), be); },
                        "[precision] the cpu backend has no layernorm kernel for out=bf16 x=bf16 gamma=bf16 beta=bf16");
  check_policy_supported(make_policy(Precision::Bf16), be);
}

// --- The GPU's plan (kCudaCaps) on the CPU backend: what `--policy-of cuda` trains with ---

// The GPU's plan keeps the residual stream, logits and the gradients between ops in 16 bits,
// reads the small weights through 16-bit copies and writes a micro-batch's weight gradients in
// 16 bits; the model allocates exactly that plan.
TEST(MixedGpt2, GpuPlanKeepsTheStreamLogitsAndGradientsIn16Bits) {
  const Batch k = make_batch();
  for (Precision p : {Precision::Bf16, Precision::Fp16}) {
    const Policy gpu = make_policy(p, {}, kCudaCaps), cpu = make_policy(p, {}, this_cpu());
    const StorageType t = p == Precision::Bf16 ? StorageType::BF16 : StorageType::F16;
    EXPECT_EQ(gpu.residual_stream, t);
    EXPECT_EQ(gpu.logits, t);
    EXPECT_EQ(gpu.activation_grads, t);
    EXPECT_EQ(gpu.weight_grads, t);
    EXPECT_EQ(gpu.small_weights, t);
    EXPECT_EQ(cpu.residual_stream, StorageType::F32);
    const ActivationPlan plan = gpt2_activation_plan(k.config, gpu, this_backend(), k.B, k.T);
    for (const auto& e : plan.entries()) {
      if (e.name == "encoded" || e.name == "h.0.residual2" || e.name == "h.1.residual3" ||
          e.name == "logits" || e.name == "dresidual" || e.name == "dln" || e.name == "dfch_gelu") {
        EXPECT_EQ(e.type, t) << e.name;
      }
      EXPECT_NE(e.name, "dlogits_lp") << "dlogits are written in place in the 16-bit logits";
    }
    cpu::Context ctx;
    Gpt2 model(k.config, cpu_backend(ctx), gpu);
    model.plan(k.B, k.T);
    EXPECT_EQ(model.activation_bytes(), plan.total_bytes());
    // Every parameter has a 16-bit copy (the GEMM weights had one already on the CPU's plan).
    EXPECT_GE(model.weight_copy_bytes(), model.num_params() * 2);
    if (cpu.operand(OpRole::Linear) == t) {  // (this CPU's fp16 copies may be fp32-held values)
      EXPECT_GT(model.weight_copy_bytes(), gpt2_weight_copy_bytes(k.config, cpu));
    }
    EXPECT_EQ(lowp_grad_floats(model.num_params(), gpu), (model.num_params() + 1) / 2);
  }
}

// Its loss and gradients stay close to fp32's, a little farther than the CPU's plan (each
// residual add, stream gradient and weight gradient rounds once more), and the rounding shows:
// it is not the CPU's plan under another name.
TEST(MixedGpt2, GpuPlanIsCloseToFp32) {
  const Batch k = make_batch();
  const Result ref = run(k, make_policy(Precision::Fp32));
  const Result bf16 = run(k, make_policy(Precision::Bf16, {}, kCudaCaps));
  expect_close(k, bf16, ref, 2e-2, 0.98, "bf16 GPU plan");
  expect_close(k, run(k, make_policy(Precision::Fp16, {}, kCudaCaps)), ref, 5e-3, 0.995, "fp16 GPU plan");
  const Result cpu_bf16 = run(k, make_policy(Precision::Bf16));
  EXPECT_GT(testing::relative_error(bf16.grads.data(), cpu_bf16.grads.data(), cpu_bf16.grads.size()), 1e-4);
  // fp32 and TF32 have no 16-bit type: the GPU's plan is the CPU's, bit for bit.
  for (Precision p : {Precision::Fp32, Precision::Tf32}) {
    const Result a = run(k, make_policy(p, {}, kCudaCaps)), b = run(k, make_policy(p));
    EXPECT_EQ(a.loss, b.loss) << precision_name(p);
    EXPECT_EQ(a.grads, b.grads) << precision_name(p);
  }
}

// Each micro-batch's 16-bit gradients are widened into the fp32 masters (+=): two half-scaled
// micro-batches give exactly one full one (halving commutes with rounding).
TEST(MixedGpt2, GpuPlanGradientsAccumulateInFp32) {
  const Batch k = make_batch();
  cpu::Context ctx;
  Gpt2 m(k.config, cpu_backend(ctx), make_policy(Precision::Bf16, {}, kCudaCaps));
  m.init_weights(3);
  m.plan(k.B, k.T);
  m.zero_grad();
  m.forward_backward(k.inputs.data(), k.targets.data(), k.B, k.T, 1.0f);
  const std::vector<float> once(m.grads().data(), m.grads().data() + m.num_params());
  m.zero_grad();
  m.forward_backward(k.inputs.data(), k.targets.data(), k.B, k.T, 0.5f);
  m.forward_backward(k.inputs.data(), k.targets.data(), k.B, k.T, 0.5f);
  for (size_t i = 0; i < once.size(); ++i) ASSERT_EQ(m.grads()[i], once[i]) << i;
  // The logits widened for the host are the 16-bit ones' values (sampling reads them).
  m.forward(k.inputs.data(), nullptr, 1, k.T);
  const float* logits = m.logits();
  for (int i = 0; i < k.T * k.config.padded_vocab_size; ++i)
    ASSERT_EQ(logits[i], bf16_to_f32(f32_to_bf16(logits[i]))) << i;
}

// The gradient-ready hook (model/weight_grads.h) hands each range once per micro-batch, in the
// order backward finishes them (ln_f, the blocks from the last, the embeddings), and each is final
// when handed: under the GPU's plan, widened into the fp32 masters by then; under accumulation,
// the sum so far.
TEST(MixedGpt2, GradsReadyHookHandsEachRangeOnceAndFinal) {
  const Batch k = make_batch();
  cpu::Context ctx;
  for (const BackendCaps caps : {BackendCaps{}, kCudaCaps}) {
    Gpt2 m(k.config, cpu_backend(ctx), make_policy(Precision::Bf16, {}, caps));
    m.init_weights(3);
    m.plan(k.B, k.T);
    const ParamTable& t = m.table();
    std::vector<ParamRange> order = {t.range("ln_f.")};
    for (int l = k.config.n_layer - 1; l >= 0; --l) order.push_back(t.range("h." + std::to_string(l) + "."));
    order.push_back({0, t.range("h.0.").begin});  // wte and wpe, last
    test::expect_grads_ready_in_order(m, order, caps.lowp_between_ops ? "GPU plan" : "CPU plan", [&] {
      m.forward_backward(k.inputs.data(), k.targets.data(), k.B, k.T, 0.5f);
    });
  }
}

TEST(WeightGrads, ARangeHandedTwiceInOneBackwardIsRefused) {
  cpu::Context ctx;
  cpu::CpuBackend be(ctx);
  WeightGrads w;
  w.setup(10, make_policy(Precision::Bf16, {}, kCudaCaps));
  FloatBuffer master(10);
  w.begin(be);
  w.ready(be, master, {2, 6});
  testing::expect_error(
      [&] {
        w.ready(be, master, {5, 8});
      },
      "[weight grads] range [5, 8) was already handed in this backward");
  testing::expect_error(
      [&] {
        w.ready(be, master, {8, 11});
      },
      "[weight grads] range [8, 11) is outside the table");
  std::vector<ParamRange> rest;
  w.set_ready_hook([&](ParamRange r) { rest.push_back(r); });
  w.finish(be, master);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].begin, 0u);
  EXPECT_EQ(rest[0].end, 2u);
  EXPECT_EQ(rest[1].begin, 6u);
  EXPECT_EQ(rest[1].end, 10u);
}

TEST(MixedGpt2, Fp32PolicyTakesTheOriginalPath) {
  const Batch k = make_batch();
  const Result a = run(k, make_policy(Precision::Fp32));
  cpu::Context ctx;
  Gpt2 m(k.config, cpu_backend(ctx));  // the default constructor every existing caller uses
  m.init_weights(7);
  m.plan(k.B, k.T);
  m.zero_grad();
  EXPECT_EQ(m.forward_backward(k.inputs.data(), k.targets.data(), k.B, k.T, 1.0f), a.loss);
  for (size_t i = 0; i < a.grads.size(); ++i) ASSERT_EQ(m.grads()[i], a.grads[i]) << i;
}

}  // namespace
}  // namespace mptrain
