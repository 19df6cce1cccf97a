// The precision policy table (precision/policy.h): the autocast rules per precision, the
// dtypes that follow from overrides, the refusals, and `mptrain explain` printing it.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "backend/backend.h"
#include "backend/device.h"
#include "common/test_util.h"
#include "core/error.h"
#include "precision/policy.h"

namespace mptrain {
namespace {

using testing::expect_error;

constexpr StorageType F32 = StorageType::F32, BF16 = StorageType::BF16, F16 = StorageType::F16;

TEST(Policy, Fp32IsAllFp32) {
  const Policy p = make_policy(Precision::Fp32);
  ASSERT_EQ(p.rules.size(), static_cast<size_t>(kNumOpRoles));
  EXPECT_TRUE(p.all_fp32());
  EXPECT_FALSE(p.uses_fp16());
  for (int k = 0; k < kNumOpRoles; ++k)
    EXPECT_EQ(p.rules[k].op, static_cast<OpRole>(k)) << "rules indexed by OpRole";
}

TEST(Policy, Bf16FollowsAutocast) {
  const Policy p = make_policy(Precision::Bf16);
  EXPECT_FALSE(p.all_fp32());
  EXPECT_FALSE(p.uses_fp16());
  // GEMM-like ops: bf16 products, fp32 accumulation, bf16 output (logits excepted, see below).
  for (OpRole op : {OpRole::Linear, OpRole::AttnScores, OpRole::AttnValues, OpRole::LmHead}) {
    EXPECT_EQ(p.rule(op).compute, ComputeType::BF16) << role_name(op);
    EXPECT_EQ(p.rule(op).accumulate, F32) << role_name(op);
  }
  EXPECT_EQ(p.rule(OpRole::Linear).output, BF16);
  EXPECT_EQ(p.rule(OpRole::AttnValues).output, BF16);
  EXPECT_EQ(p.rule(OpRole::LmHead).output, F32);      // fused loss reads fp32 logits (stated in the note)
  EXPECT_EQ(p.rule(OpRole::AttnScores).output, F32);  // scores go to the fp32 softmax
  // fp32 ops.
  for (OpRole op : {OpRole::Embedding, OpRole::LayerNorm, OpRole::Softmax, OpRole::Gelu, OpRole::Residual,
                    OpRole::Loss, OpRole::GradNorm, OpRole::Optimizer})
    EXPECT_EQ(p.rule(op).compute, ComputeType::F32) << role_name(op);
  EXPECT_EQ(p.rule(OpRole::Residual).output, F32);
  EXPECT_EQ(p.rule(OpRole::Embedding).output, F32);
  EXPECT_EQ(p.rule(OpRole::Loss).output, F32);
  // Saved for backward in bf16: what feeds a GEMM.
  EXPECT_EQ(p.rule(OpRole::LayerNorm).saved, BF16);
  EXPECT_EQ(p.rule(OpRole::Softmax).saved, BF16);
  EXPECT_EQ(p.rule(OpRole::Gelu).saved, BF16);
  EXPECT_EQ(p.master_weights, F32);
  EXPECT_EQ(p.gradients, F32);
  EXPECT_EQ(p.optimizer_state, F32);
  EXPECT_NE(p.rule(OpRole::LmHead).note.find("fp32"), std::string::npos);
}

TEST(Policy, Tf32IsFp32StorageWithTf32Gemms) {
  const Policy p = make_policy(Precision::Tf32);
  EXPECT_FALSE(p.all_fp32());
  EXPECT_EQ(p.rule(OpRole::Linear).compute, ComputeType::TF32);
  for (const OpRule& r : p.rules) {
    EXPECT_EQ(r.input, F32) << role_name(r.op);
    EXPECT_EQ(r.output, F32) << role_name(r.op);
    EXPECT_EQ(r.saved, F32) << role_name(r.op);
  }
  EXPECT_NE(p.rule(OpRole::Linear).note.find("emulation"), std::string::npos) << "tf32 on a CPU must say so";
}

TEST(Policy, Fp16UsesFp16AndSaysItIsEmulated) {
  const Policy p = make_policy(Precision::Fp16);
  EXPECT_TRUE(p.uses_fp16());
  EXPECT_EQ(p.rule(OpRole::Linear).compute, ComputeType::F16);
  EXPECT_EQ(p.rule(OpRole::LayerNorm).output, F16);
  EXPECT_EQ(p.rule(OpRole::Loss).compute, ComputeType::F32);
  EXPECT_NE(p.rule(OpRole::Linear).note.find("65504"), std::string::npos);
}

// The tensors between ops (policy.h): fp32 on the CPU's plan, except dlogits, which the loss
// writes in the LM head backward's operand storage; that storage follows the backend.
TEST(Policy, TensorsBetweenOpsFollowThePlanAndTheBackend) {
  for (Precision pr : {Precision::Fp32, Precision::Tf32, Precision::Bf16, Precision::Fp16}) {
    const Policy p = make_policy(pr);
    EXPECT_EQ(p.residual_stream, p.rule(OpRole::Residual).output) << precision_name(pr);
    EXPECT_EQ(p.logits, p.rule(OpRole::LmHead).output) << precision_name(pr);
    EXPECT_EQ(p.dlogits, p.operand(OpRole::LmHead)) << precision_name(pr);
    for (StorageType t : {p.residual_stream, p.logits, p.activation_grads, p.weight_grads, p.small_weights})
      EXPECT_EQ(t, F32) << precision_name(pr);
  }
  EXPECT_EQ(make_policy(Precision::Fp32).dlogits, F32);
  EXPECT_EQ(make_policy(Precision::Tf32).dlogits, F32);  // fp32 storage, TF32-rounded values
  EXPECT_EQ(make_policy(Precision::Bf16).dlogits, BF16);
  // fp16 GEMMs: fp16 operands where the backend multiplies fp16, fp16 values in fp32 elsewhere.
  const Policy emulated = make_policy(Precision::Fp16, {}, BackendCaps{.fp16_gemm = false});
  const Policy native = make_policy(Precision::Fp16, {}, BackendCaps{.fp16_gemm = true});
  for (OpRole op : {OpRole::Linear, OpRole::AttnScores, OpRole::AttnValues, OpRole::LmHead}) {
    EXPECT_EQ(emulated.operand(op), F32) << role_name(op);
    EXPECT_EQ(native.operand(op), F16) << role_name(op);
  }
  EXPECT_EQ(emulated.dlogits, F32);
  EXPECT_EQ(native.dlogits, F16);
  EXPECT_EQ(make_policy(Precision::Bf16, {}, BackendCaps{.fp16_gemm = true}).operand(OpRole::Linear), BF16);
  // operand() is for GEMMs only.
  expect_error([] { (void)make_policy(Precision::Bf16).operand(OpRole::LayerNorm); }, "not a GEMM");
}

TEST(Policy, OverridesDeriveDependentDtypes) {
  // linear=fp32 under bf16: its input (LayerNorm's output) and its outputs become fp32 too.
  Policy p = make_policy(Precision::Bf16, parse_op_precision({"linear=fp32"}));
  EXPECT_EQ(p.rule(OpRole::Linear).compute, ComputeType::F32);
  EXPECT_EQ(p.rule(OpRole::LayerNorm).output, F32);
  EXPECT_EQ(p.rule(OpRole::Linear).output, F32);
  EXPECT_EQ(p.rule(OpRole::AttnValues).compute, ComputeType::BF16);
  // gelu=fp32 keeps GELU's output fp32; gelu=bf16 under fp32 makes it bf16 (and the model mixed).
  p = make_policy(Precision::Bf16, parse_op_precision({"gelu=fp32"}));
  EXPECT_EQ(p.rule(OpRole::Gelu).output, F32);
  p = make_policy(Precision::Fp32, parse_op_precision({"gelu=bf16"}));
  EXPECT_EQ(p.rule(OpRole::Gelu).output, BF16);
  EXPECT_FALSE(p.all_fp32());
  // Several overrides, comma-separated and repeated.
  const auto o = parse_op_precision({"gelu=fp16,lm_head=fp32", "attn_scores=tf32"});
  ASSERT_EQ(o.size(), 3u);
  EXPECT_EQ(o[0].op, OpRole::Gelu);
  EXPECT_EQ(o[1].op, OpRole::LmHead);
  EXPECT_EQ(o[2].dtype, ComputeType::TF32);
}

TEST(Policy, RefusesOpsThatCannotRunInTheDtype) {
  expect_error([] { make_policy(Precision::Fp16, parse_op_precision({"layernorm=fp16"})); },
               "[precision] layernorm cannot run in fp16: ");
  expect_error([] { make_policy(Precision::Fp16, parse_op_precision({"softmax=fp16"})); },
               "[precision] softmax cannot run in fp16: ");
  expect_error([] { make_policy(Precision::Bf16, parse_op_precision({"loss=bf16"})); },
               "[precision] loss cannot run in bf16: ");
  expect_error([] { make_policy(Precision::Bf16, parse_op_precision({"residual=bf16"})); },
               "residual cannot run in");
  expect_error([] { make_policy(Precision::Bf16, parse_op_precision({"optimizer=fp16"})); },
               "optimizer cannot run");
  expect_error([] { make_policy(Precision::Bf16, parse_op_precision({"gelu=tf32"})); },
               "gelu cannot run in tf32");
  expect_error([] { parse_op_precision({"layer_norm=fp32"}); }, "unknown op 'layer_norm'");
  expect_error([] { parse_op_precision({"gelu=half"}); }, "unknown dtype 'half'");
  expect_error([] { parse_op_precision({"gelu"}); }, "expects op=dtype");
  expect_error([] { parse_precision("fp8"); }, "unknown precision 'fp8'");
}

// One vocabulary: every op of the interface names the roles whose rules decide its dtypes
// (backend/op_list.h; non-empty is checked at compile time), and the policy has a rule for each.
TEST(Policy, EveryOpOfTheInterfaceHasItsRoleRule) {
  const Policy p = make_policy(Precision::Bf16);
  ASSERT_EQ(p.rules.size(), static_cast<size_t>(kNumOpRoles));
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = static_cast<Op>(i);
    ASSERT_NE(op_roles(op), 0u) << backend_op_name(op);
    for (int r = 0; r < kNumOpRoles; ++r) {
      if (has_role(op_roles(op), static_cast<OpRole>(r))) {
        EXPECT_EQ(p.rule(static_cast<OpRole>(r)).op, static_cast<OpRole>(r)) << backend_op_name(op);
      }
    }
  }
  EXPECT_EQ(op_roles(Op::Attention), role(OpRole::AttnScores) | role(OpRole::Softmax) | role(OpRole::AttnValues));
  EXPECT_EQ(op_roles(Op::Swiglu), role(OpRole::Swiglu));
  EXPECT_EQ(op_roles(Op::Rope), role(OpRole::Rope));
  EXPECT_EQ(op_roles(Op::RmsNormBackward), role(OpRole::RmsNorm));
}

// Llama's ops have rules of their own: RMSNorm and rotary embeddings like LayerNorm's fp32 math,
// SwiGLU and ReLU² like GELU (the linear's dtype by default), each with its own override.
TEST(Policy, LlamaOpsHaveTheirOwnRulesAndKnobs) {
  Policy p = make_policy(Precision::Bf16);
  for (const OpRole r : {OpRole::RmsNorm, OpRole::Rope, OpRole::Swiglu, OpRole::Relu2})
    EXPECT_EQ(p.rule(r).compute, ComputeType::F32) << role_name(r);
  EXPECT_EQ(p.rule(OpRole::RmsNorm).output, BF16);
  EXPECT_EQ(p.rule(OpRole::Rope).output, BF16);
  EXPECT_EQ(p.rule(OpRole::Swiglu).output, BF16);
  EXPECT_EQ(p.rule(OpRole::Relu2).output, BF16);
  p = make_policy(Precision::Bf16, parse_op_precision({"swiglu=fp32"}));
  EXPECT_EQ(p.rule(OpRole::Swiglu).output, F32);
  EXPECT_EQ(p.rule(OpRole::Gelu).output, BF16) << "each activation has its own knob";
  EXPECT_EQ(p.rule(OpRole::Relu2).output, BF16);
  p = make_policy(Precision::Fp32, parse_op_precision({"relu2=fp16"}));
  EXPECT_EQ(p.rule(OpRole::Relu2).output, F16);
  EXPECT_TRUE(p.uses_fp16());
  expect_error([] { make_policy(Precision::Bf16, parse_op_precision({"rope=bf16"})); },
               "[precision] rope cannot run in bf16: it turns q and k in place");
  expect_error([] { make_policy(Precision::Fp16, parse_op_precision({"rmsnorm=fp16"})); },
               "[precision] rmsnorm cannot run in fp16");
  expect_error([] { make_policy(Precision::Bf16, parse_op_precision({"swiglu=tf32"})); },
               "swiglu cannot run in tf32");
}

// A Llama's plan prints its own rows: RMSNorm, rotary embeddings and its MLP's activation, where
// GPT-2's prints LayerNorm and GELU.
TEST(Explain, LlamaPrintsItsOwnRows) {
  const auto swiglu = testing::run_mptrain("explain --preset llama-tiny --precision bf16 --batch 2 --seq 32");
  ASSERT_EQ(swiglu.exit_code, 0) << swiglu.output;
  for (const char* s : {"\nrmsnorm       fp32   fp32    fp32   bf16", "\nrope          bf16   fp32    fp32   bf16",
                        "\nswiglu        bf16   fp32    fp32   bf16", "silu(gate)·up"})
    EXPECT_NE(swiglu.output.find(s), std::string::npos) << s << " in:\n" << swiglu.output;
  for (const char* s : {"\nlayernorm ", "\ngelu ", "\nrelu2 ", "\ncopy "})
    EXPECT_EQ(swiglu.output.find(s), std::string::npos) << s << " in:\n" << swiglu.output;
  const auto relu2 =
      testing::run_mptrain("explain --preset llama-tiny --precision bf16 --batch 2 --seq 32 --mlp relu2");
  ASSERT_EQ(relu2.exit_code, 0) << relu2.output;
  EXPECT_NE(relu2.output.find("\nrelu2         bf16   fp32    fp32   bf16"), std::string::npos) << relu2.output;
  EXPECT_EQ(relu2.output.find("\nswiglu "), std::string::npos) << relu2.output;
  const auto gpt2 = testing::run_mptrain("explain --preset d2 --precision bf16 --batch 2 --seq 32");
  ASSERT_EQ(gpt2.exit_code, 0) << gpt2.output;
  for (const char* s : {"\nrmsnorm ", "\nrope ", "\nswiglu ", "\ncopy "})
    EXPECT_EQ(gpt2.output.find(s), std::string::npos) << s << " in:\n" << gpt2.output;
}

TEST(Explain, PrintsThePlanAndTotals) {
  const auto r = testing::run_mptrain("explain --preset d2 --precision bf16 --batch 2 --seq 64");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s :
       {"layernorm", "attn_scores", "softmax", "lm_head", "optimizer", "parameters (fp32 master)",
        "optimizer state (AdamW, 2 x fp32)", "GEMM weight copies", "activations saved for backward"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s << " in:\n" << r.output;
  const auto f = testing::run_mptrain("explain --preset d2 --precision fp32 --batch 2 --seq 64");
  ASSERT_EQ(f.exit_code, 0) << f.output;
  EXPECT_NE(f.output.find("none (fp32 GEMMs)"), std::string::npos) << f.output;
  const auto h = testing::run_mptrain("explain --preset d2 --precision fp16 --batch 2 --seq 64");
  ASSERT_EQ(h.exit_code, 0) << h.output;
  EXPECT_NE(h.output.find("loss scaling: dynamic"), std::string::npos) << h.output;
  const auto t = testing::run_mptrain("explain --preset d2 --precision tf32");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_NE(t.output.find("emulation"), std::string::npos) << t.output;
}

// The GPU's plan as `train --policy-of cuda` runs it: the residual stream, logits and small
// weights 16-bit, a micro-batch's 16-bit gradients counted, for GPT-2 and BERT.
TEST(Explain, PrintsTheGpuPlanRunOnTheCpu) {
  for (const char* preset : {"d2", "bert-tiny"}) {
    const auto r = testing::run_mptrain(std::string("explain --preset ") + preset +
                                        " --precision bf16 --policy-of cuda --batch 2 --seq 32");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* s : {"the GPU's plan (--policy-of cuda)", "residual      bf16   fp32    fp32   bf16",
                          "lm_head       bf16   bf16    fp32   bf16", "the GPU's residual stream is bf16",
                          "micro-batch gradients (bf16)", "weight copies (every weight)"})
      EXPECT_NE(r.output.find(s), std::string::npos) << preset << ": " << s << " in:\n" << r.output;
    const auto cpu = testing::run_mptrain(std::string("explain --preset ") + preset +
                                          " --precision bf16 --batch 2 --seq 32");
    ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
    EXPECT_EQ(cpu.output.find("micro-batch gradients"), std::string::npos) << cpu.output;
    EXPECT_NE(cpu.output.find("residual      fp32   fp32    fp32   fp32"), std::string::npos) << cpu.output;
  }
}

// `explain --device cuda`: the plan `train --device cuda` runs and the device memory it needs,
// sized by the CUDA backend's own answers (no GPU needed). GPT-2 124M, bf16, B=16, T=1024: flash
// attention keeps per layer fp32 row log-sum-exps (B·NH·T) and the int key mask (B·T), each
// 64-byte aligned, and reads its output from attn_values' saved y: 12 × 851,968 bytes = 9.8 MiB,
// where the CPU's attention under the same dtypes keeps the probabilities (B·NH·T·T in bf16,
// 4.6 GiB).
TEST(Explain, DeviceCudaPrintsTheGpusPlanAndDeviceMemory) {
  const std::string args = "explain --preset gpt2 --precision bf16 --batch 16 --seq 1024";
  if (!cuda_compiled()) {
    testing::expect_clear_error(testing::run_mptrain(args + " --device cuda"),
                                "this build has no CUDA backend");
    return;
  }
  const auto gpu = testing::run_mptrain(args + " --device cuda");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  for (const char* s :
       {"the plan of `mptrain train --device cuda`",
        "device memory:", "residual      bf16   fp32    fp32   bf16", "cuBLASLt on tensor cores",
        "softmax       fp32   fp32    fp32   bf16   9.8 MiB", "micro-batch gradients (bf16)"})
    EXPECT_NE(gpu.output.find(s), std::string::npos) << s << " in:\n" << gpu.output;
  EXPECT_EQ(gpu.output.find("oneDNN"), std::string::npos) << gpu.output;
  const auto cpu = testing::run_mptrain(args + " --policy-of cuda");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_NE(cpu.output.find("softmax       fp32   fp32    fp32   bf16   4608.0 MiB"), std::string::npos)
      << cpu.output;
  EXPECT_NE(cpu.output.find("oneDNN"), std::string::npos) << cpu.output;
  testing::expect_clear_error(testing::run_mptrain(args + " --device cuda --policy-of cuda"),
                              "--policy-of runs another device's plan on the CPU: it needs --device cpu");
}

TEST(Explain, BadInputIsOneClearError) {
  testing::expect_clear_error(testing::run_mptrain("explain --precision fp8"), "unknown precision 'fp8'");
  testing::expect_clear_error(testing::run_mptrain("explain --precision fp16 --op-precision layernorm=fp16"),
                              "[precision] layernorm cannot run in fp16");
  testing::expect_clear_error(testing::run_mptrain("explain --precision bf16 --op-precision softmax=bf16"),
                              "[precision] softmax cannot run in bf16");
  testing::expect_clear_error(testing::run_mptrain("explain --preset nope"), "nope");
  testing::expect_clear_error(testing::run_mptrain("explain --policy-of tpu"), "--policy-of");
}

}  // namespace
}  // namespace mptrain
