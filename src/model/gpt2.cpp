// GPT-2: parameter table, weight copies, activation plan; the forward and backward over the
// op interface are in gpt2_pass.cpp.
#include "model/gpt2.h"

#include <algorithm>
#include <string>

#include "backend/ops/gemm_mixed.h"
#include "core/error.h"
#include "core/rng.h"

namespace mptrain {

ParamTable gpt2_param_table(const Gpt2Config& c) {
  validate(c);
  const int64_t C = c.n_embd, Vp = c.padded_vocab_size, V = c.vocab_size;
  // Conv1D weights are stored [in, out]; the block's four are the hidden matrices (Muon's).
  constexpr MatrixLayout InOut = MatrixLayout::InOut;
  ParamTable t;
  t.add("wte.weight", {Vp, C}, InitRule::NormalRowsThenZeros, true, {V, C});
  t.add("wpe.weight", {c.block_size, C}, InitRule::Normal, true);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    t.add(p + "ln_1.weight", {C}, InitRule::Ones, false);
    t.add(p + "ln_1.bias", {C}, InitRule::Zeros, false);
    t.add_matrix(p + "attn.c_attn.weight", {C, 3 * C}, InitRule::Normal, InOut, QkvRole::Fused);
    t.add(p + "attn.c_attn.bias", {3 * C}, InitRule::Zeros, false);
    t.add_matrix(p + "attn.c_proj.weight", {C, C}, InitRule::NormalResidual, InOut);
    t.add(p + "attn.c_proj.bias", {C}, InitRule::Zeros, false);
    t.add(p + "ln_2.weight", {C}, InitRule::Ones, false);
    t.add(p + "ln_2.bias", {C}, InitRule::Zeros, false);
    t.add_matrix(p + "mlp.c_fc.weight", {C, 4 * C}, InitRule::Normal, InOut);
    t.add(p + "mlp.c_fc.bias", {4 * C}, InitRule::Zeros, false);
    t.add_matrix(p + "mlp.c_proj.weight", {4 * C, C}, InitRule::NormalResidual, InOut);
    t.add(p + "mlp.c_proj.bias", {C}, InitRule::Zeros, false);
  }
  t.add("ln_f.weight", {C}, InitRule::Ones, false);
  t.add("ln_f.bias", {C}, InitRule::Zeros, false);
  return t;
}

double gpt2_flops_per_token(const Gpt2Config& c, int T) {
  const double C = c.n_embd, L = c.n_layer;
  const double matmul_params = L * (12.0 * C * C) + static_cast<double>(c.padded_vocab_size) * C;
  return 6.0 * matmul_params + 6.0 * L * C * T;
}

double gpt2_recompute_flops_per_token(const Gpt2Config& c, int T, RecomputeSet set) {
  const double C = c.n_embd, L = c.n_layer;
  if (set.has(Recompute::Block)) return L * (2.0 * 12.0 * C * C + 2.0 * C * T);
  return (set.has(Recompute::Mlp) ? L * 2.0 * 4.0 * C * C : 0.0) +
         (set.has(Recompute::Attention) ? L * 2.0 * C * T : 0.0);
}

GemmReader gpt2_gemm_reader(const ParamSpec& spec) {
  if (spec.shape.size() != 2 || spec.name == "wpe.weight") return GemmReader::None;
  return spec.name == "wte.weight" ? GemmReader::LmHead : GemmReader::Linear;
}

size_t gpt2_weight_copy_bytes(const Gpt2Config& config, const Policy& policy) {
  return weight_copy_bytes(gpt2_param_table(config), gpt2_gemm_reader, policy);
}

// `be` is bound, not moved, until ModelCore takes it: the policy is made from it first.
Gpt2::Gpt2(const Gpt2Config& config, std::unique_ptr<Backend>&& be, Precision precision)
    : Gpt2(config, std::move(be), make_policy(precision, {}, be->caps())) {}

Gpt2::Gpt2(const Gpt2Config& config, std::unique_ptr<Backend>&& be, const Policy& policy)
    : CausalLm(gpt2_param_table(config), std::move(be), policy, config.vocab_size, config.padded_vocab_size),
      config_(config) {
  w_ = bind_gpt2_tensors(table_, params_.data(), config_.n_layer);
  g_ = bind_gpt2_tensors(table_, grads_.data(), config_.n_layer);
  setup_weight_copies();
}

Gpt2::~Gpt2() = default;

void Gpt2::init_weights(uint64_t seed) { init_params_scaled(seed, config_.init_std, config_.n_layer); }

ActivationPlan gpt2_activation_plan(const Gpt2Config& config, const Policy& policy, const Backend& be, int B,
                                    int T, Gpt2Acts* handles) {
  check_batch_shape(B, T, config.block_size);
  using Role = ActivationPlan::Role;
  constexpr StorageType F32 = StorageType::F32;
  const Role saved = Role::Saved, scratch = Role::Scratch;
  const size_t BT = static_cast<size_t>(B) * T, C = config.n_embd;
  const size_t Vp = config.padded_vocab_size;
  const bool mixed = !policy.all_fp32();
  // Storage dtypes, all read from the policy (fp32 everywhere in the fp32 path).
  const StorageType ln_s = policy.rule(OpRole::LayerNorm).output, lin_s = policy.rule(OpRole::Linear).output;
  const StorageType probs_s = policy.rule(OpRole::Softmax).saved,
                    y_s = policy.rule(OpRole::AttnValues).output;
  const StorageType gelu_s = policy.rule(OpRole::Gelu).output;
  // What the attention keeps for backward and its scratch: the backend's choice.
  const AttentionBytes att =
      be.attention_bytes(B, T, static_cast<int>(C), config.n_head, attention_dtypes(policy));
  const StorageType lin_op = policy.operand(OpRole::Linear);
  auto words = [](size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); };

  ActivationPlan plan;
  Gpt2Acts a{};
  const StorageType stream = policy.residual_stream, grads = policy.activation_grads;
  a.encoded = plan.add("encoded", BT * C, stream, OpRole::Embedding, saved);
  // A block's tensors: its own, saved for backward, or (what --recompute names) one set every
  // block shares as scratch, which the backward refills before it reads them (gpt2_pass.cpp).
  const RecomputeSet rc = config.recompute;
  const bool block = rc.has(Recompute::Block), norm = block || rc.has(Recompute::Norm),
             mlp = block || rc.has(Recompute::Mlp), gelu = mlp || rc.has(Recompute::Gelu),
             attention = block || rc.has(Recompute::Attention);
  LayerTensors layer(plan);
  const auto add = [&](bool is_shared, const std::string& p, const std::string& name, size_t numel,
                       StorageType t, OpRole op) { return layer.add(is_shared, p, name, numel, t, op); };
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    Gpt2LayerActs la;
    la.ln1 = norm ? add(true, p, "ln", BT * C, ln_s, OpRole::LayerNorm)
                  : plan.add(p + "ln1", BT * C, ln_s, OpRole::LayerNorm, saved);
    la.ln1_mean = add(block, p, "ln1_mean", BT, F32, OpRole::LayerNorm);
    la.ln1_rstd = add(block, p, "ln1_rstd", BT, F32, OpRole::LayerNorm);
    la.qkv = add(block, p, "qkv", BT * 3 * C, lin_s, OpRole::Linear);
    la.att = add(attention, p, "att", att.saved / storage_bytes(probs_s), probs_s, OpRole::Softmax);
    la.atty = add(block, p, "atty", BT * C, y_s, OpRole::AttnValues);
    la.residual2 = add(block, p, "residual2", BT * C, stream, OpRole::Residual);
    la.ln2 = norm ? la.ln1 : plan.add(p + "ln2", BT * C, ln_s, OpRole::LayerNorm, saved);  // one LN at a time
    la.ln2_mean = add(block, p, "ln2_mean", BT, F32, OpRole::LayerNorm);
    la.ln2_rstd = add(block, p, "ln2_rstd", BT, F32, OpRole::LayerNorm);
    la.fch = add(mlp, p, "fch", BT * 4 * C, lin_s, OpRole::Linear);
    la.fch_gelu = add(gelu, p, "fch_gelu", BT * 4 * C, gelu_s, OpRole::Gelu);
    la.residual3 = plan.add(p + "residual3", BT * C, stream, OpRole::Residual, saved);
    a.layers.push_back(la);
  }
  a.lnf = plan.add("lnf", BT * C, ln_s, OpRole::LayerNorm, saved);
  a.lnf_mean = plan.add("lnf_mean", BT, F32, OpRole::LayerNorm, saved);
  a.lnf_rstd = plan.add("lnf_rstd", BT, F32, OpRole::LayerNorm, saved);
  // The logits become dlogits in place (fused loss): working memory, not state kept for backward.
  a.logits = plan.add("logits", BT * Vp, policy.logits, OpRole::LmHead, scratch);
  a.losses = plan.add("losses", BT, F32, OpRole::Loss, scratch);
  a.dloss = plan.add("dloss", BT, F32, OpRole::Loss, scratch);
  // Scratch shared by every layer (reused; not saved for backward).
  if (mixed) {
    a.attn_scratch = plan.add("attn_scratch", words(att.scratch), F32, OpRole::Softmax, scratch);
    a.gemm_out = be.linear_uses_scratch()
                     ? plan.add("gemm_out", BT * 4 * C, F32, OpRole::Linear, scratch)  // fp32 GEMM result before bias
                     : ActivationPlan::kNone;
    a.dresidual = plan.add("dresidual", BT * C, grads, OpRole::Residual, scratch);
    a.dln = plan.add("dln", BT * C, grads, OpRole::LayerNorm, scratch);
    a.dout_lp = plan.add("dout_lp", BT * C, lin_op, OpRole::Linear, scratch);  // dresidual as a GEMM operand
    a.dqkv = plan.add("dqkv", BT * 3 * C, lin_s, OpRole::Linear, scratch);
    a.datty = plan.add("datty", BT * C, y_s, OpRole::AttnValues, scratch);
    a.dfch_gelu = plan.add("dfch_gelu", BT * 4 * C, grads, OpRole::Gelu, scratch);
    a.dfch = plan.add("dfch", BT * 4 * C, lin_op, OpRole::Gelu, scratch);
    // dlogits beside fp32 logits (TF32: where they are rounded once for both GEMMs); 16-bit
    // logits of dlogits' own dtype (a GPU's plan) take them in place.
    a.dlogits_lp = policy.dlogits == policy.logits && policy.logits != F32
                       ? ActivationPlan::kNone
                       : plan.add("dlogits_lp", BT * Vp, policy.dlogits, OpRole::LmHead, scratch);
  } else {
    a.attn_scratch = plan.add("attn_scratch", words(att.scratch), F32, OpRole::Softmax, scratch);
    // One buffer plays two parts in fp32: the fp32 accumulator is proj_out (an fp32 linear
    // accumulates in place in its output, or GELU's pre), and GELU's backward runs in place in dfch.
    a.gemm_out = be.linear_uses_scratch() ? plan.add("proj_out", BT * C, F32, OpRole::Linear, scratch)
                                          : ActivationPlan::kNone;
    a.dresidual = plan.add("dresidual", BT * C, grads, OpRole::Residual, scratch);
    a.dln = plan.add("dln", BT * C, grads, OpRole::LayerNorm, scratch);
    a.dqkv = plan.add("dqkv", BT * 3 * C, F32, OpRole::Linear, scratch);
    a.datty = plan.add("datty", BT * C, F32, OpRole::AttnValues, scratch);
    a.dfch = plan.add("dfch", BT * 4 * C, F32, OpRole::Gelu, scratch);
    a.dfch_gelu = a.dfch;
    a.dout_lp = a.dlogits_lp = ActivationPlan::kNone;  // fp32 gradients are their own operands
  }
  if (handles) *handles = std::move(a);
  return plan;
}

ActivationPlan Gpt2::plan_activations(int B, int T) {
  ActivationPlan plan = gpt2_activation_plan(config_, policy_, *be_, B, T, &a_);
  head_ = {a_.logits, a_.losses, a_.dloss, a_.dlogits_lp};
  return plan;
}

}  // namespace mptrain
