// GPT-2 on the CPU backend: parameter table, activation plan, and the fp32 forward and
// backward, layer by layer. The mixed-precision path is in gpt2_mixed.cpp.
#include "model/gpt2.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/ops/attention.h"
#include "backend/ops/crossentropy.h"
#include "backend/ops/encoder.h"
#include "backend/ops/gelu.h"
#include "backend/ops/gemm.h"
#include "backend/ops/gemm_mixed.h"
#include "backend/ops/layernorm.h"
#include "backend/ops/residual.h"
#include "core/error.h"
#include "core/rng.h"

namespace mptrain {

ParamTable gpt2_param_table(const Gpt2Config& c) {
  validate(c);
  const int64_t C = c.n_embd, Vp = c.padded_vocab_size, V = c.vocab_size;
  ParamTable t;
  t.add("wte.weight", {Vp, C}, InitRule::NormalRowsThenZeros, true, {V, C});
  t.add("wpe.weight", {c.block_size, C}, InitRule::Normal, true);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    t.add(p + "ln_1.weight", {C}, InitRule::Ones, false);
    t.add(p + "ln_1.bias", {C}, InitRule::Zeros, false);
    t.add(p + "attn.c_attn.weight", {C, 3 * C}, InitRule::Normal, true);
    t.add(p + "attn.c_attn.bias", {3 * C}, InitRule::Zeros, false);
    t.add(p + "attn.c_proj.weight", {C, C}, InitRule::NormalResidual, true);
    t.add(p + "attn.c_proj.bias", {C}, InitRule::Zeros, false);
    t.add(p + "ln_2.weight", {C}, InitRule::Ones, false);
    t.add(p + "ln_2.bias", {C}, InitRule::Zeros, false);
    t.add(p + "mlp.c_fc.weight", {C, 4 * C}, InitRule::Normal, true);
    t.add(p + "mlp.c_fc.bias", {4 * C}, InitRule::Zeros, false);
    t.add(p + "mlp.c_proj.weight", {4 * C, C}, InitRule::NormalResidual, true);
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

GemmReader gpt2_gemm_reader(const ParamSpec& spec) {
  if (spec.shape.size() != 2 || spec.name == "wpe.weight") return GemmReader::None;
  return spec.name == "wte.weight" ? GemmReader::LmHead : GemmReader::Linear;
}

bool gpt2_is_gemm_weight(const ParamSpec& spec) { return gpt2_gemm_reader(spec) != GemmReader::None; }

ComputeType gpt2_weight_compute(const ParamSpec& spec, const Policy& policy) {
  return policy.rule(spec.name == "wte.weight" ? OpKind::LmHead : OpKind::Linear).compute;
}

size_t gpt2_weight_copy_bytes(const Gpt2Config& config, const Policy& policy) {
  return weight_copy_bytes(gpt2_param_table(config), gpt2_gemm_reader, policy);
}

Gpt2::Gpt2(const Gpt2Config& config, cpu::Context& ctx, Precision precision)
    : Gpt2(config, ctx, make_policy(precision, {}, cpu::GemmWorkspace(ctx).caps())) {}

Gpt2::Gpt2(const Gpt2Config& config, cpu::Context& ctx, const Policy& policy)
    : config_(config),
      ctx_(ctx),
      precision_(policy.precision),
      policy_(policy),
      mixed_(!policy.all_fp32()),
      table_(gpt2_param_table(config)) {
  check_cpu_runs(policy_);
  params_.resize(table_.total());
  grads_.resize(table_.total());
  w_ = bind_gpt2_tensors(table_, params_.data(), config_.n_layer);
  g_ = bind_gpt2_tensors(table_, grads_.data(), config_.n_layer);
  if (mixed_) {
    ws_ = std::make_unique<cpu::GemmWorkspace>(ctx_);
    check_operands_supported(policy_, *ws_);
    setup_weight_copies();
  }
}

Gpt2::~Gpt2() = default;

void Gpt2::init_weights(uint64_t seed) {
  copies_.mark_stale();
  const float residual_std = config_.init_std / std::sqrt(2.0f * config_.n_layer);
  init_params(table_, params_.data(), seed, config_.init_std, residual_std);
}

ActivationPlan gpt2_activation_plan(const Gpt2Config& config, const Policy& policy, int B, int T,
                                    Gpt2Acts* handles) {
  MPT_CHECK(B > 0 && T > 0, "batch size and sequence length must be positive");
  MPT_CHECK(T <= config.block_size, "sequence length " + std::to_string(T) + " is longer than the model's context (" +
                                        std::to_string(config.block_size) + " positions)");
  using Role = ActivationPlan::Role;
  constexpr StorageType F32 = StorageType::F32;
  const Role saved = Role::Saved, scratch = Role::Scratch;
  const size_t BT = static_cast<size_t>(B) * T, C = config.n_embd;
  const size_t Vp = config.padded_vocab_size;
  const bool mixed = !policy.all_fp32();
  // Storage dtypes, all read from the policy (fp32 everywhere in the fp32 path).
  const StorageType ln_s = policy.rule(OpKind::LayerNorm).output, lin_s = policy.rule(OpKind::Linear).output;
  const StorageType probs_s = policy.rule(OpKind::Softmax).saved, y_s = policy.rule(OpKind::AttnValues).output;
  const StorageType gelu_s = policy.rule(OpKind::Gelu).output;
  const cpu::AttentionTypes at = attention_types(policy);
  const StorageType lin_op = policy.operand(OpKind::Linear);
  auto words = [](size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); };

  ActivationPlan plan;
  Gpt2Acts a{};
  const StorageType stream = policy.residual_stream, grads = policy.activation_grads;
  a.encoded = plan.add("encoded", BT * C, stream, OpKind::Embedding, saved);
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    Gpt2LayerActs la;
    la.ln1 = plan.add(p + "ln1", BT * C, ln_s, OpKind::LayerNorm, saved);
    la.ln1_mean = plan.add(p + "ln1_mean", BT, F32, OpKind::LayerNorm, saved);
    la.ln1_rstd = plan.add(p + "ln1_rstd", BT, F32, OpKind::LayerNorm, saved);
    la.qkv = plan.add(p + "qkv", BT * 3 * C, lin_s, OpKind::Linear, saved);
    if (mixed)
      la.att = plan.add(p + "att", cpu::attention_saved_bytes_typed(B, T, C, config.n_head, at) / storage_bytes(probs_s),
                        probs_s, OpKind::Softmax, saved);
    else
      la.att = plan.add(p + "att", cpu::attention_saved_floats(B, T, C, config.n_head), F32, OpKind::Softmax, saved);
    la.atty = plan.add(p + "atty", BT * C, y_s, OpKind::AttnValues, saved);
    la.residual2 = plan.add(p + "residual2", BT * C, stream, OpKind::Residual, saved);
    la.ln2 = plan.add(p + "ln2", BT * C, ln_s, OpKind::LayerNorm, saved);
    la.ln2_mean = plan.add(p + "ln2_mean", BT, F32, OpKind::LayerNorm, saved);
    la.ln2_rstd = plan.add(p + "ln2_rstd", BT, F32, OpKind::LayerNorm, saved);
    la.fch = plan.add(p + "fch", BT * 4 * C, lin_s, OpKind::Linear, saved);
    la.fch_gelu = plan.add(p + "fch_gelu", BT * 4 * C, gelu_s, OpKind::Gelu, saved);
    la.residual3 = plan.add(p + "residual3", BT * C, stream, OpKind::Residual, saved);
    a.layers.push_back(la);
  }
  a.lnf = plan.add("lnf", BT * C, ln_s, OpKind::LayerNorm, saved);
  a.lnf_mean = plan.add("lnf_mean", BT, F32, OpKind::LayerNorm, saved);
  a.lnf_rstd = plan.add("lnf_rstd", BT, F32, OpKind::LayerNorm, saved);
  // The logits become dlogits in place (fused loss): working memory, not state kept for backward.
  a.logits = plan.add("logits", BT * Vp, policy.logits, OpKind::LmHead, scratch);
  a.losses = plan.add("losses", BT, F32, OpKind::Loss, scratch);
  a.dloss = plan.add("dloss", BT, F32, OpKind::Loss, scratch);
  // Scratch shared by every layer (reused; not saved for backward).
  if (mixed) {
    a.attn_scratch = plan.add("attn_scratch", words(cpu::attention_scratch_bytes_typed(B, T, C, config.n_head, at)),
                              F32, OpKind::Softmax, scratch);
    a.gemm_out = plan.add("gemm_out", BT * 4 * C, F32, OpKind::Linear, scratch);  // fp32 GEMM result before bias
    a.dresidual = plan.add("dresidual", BT * C, grads, OpKind::Residual, scratch);
    a.dln = plan.add("dln", BT * C, grads, OpKind::LayerNorm, scratch);
    a.dout_lp = plan.add("dout_lp", BT * C, lin_op, OpKind::Linear, scratch);  // dresidual as a GEMM operand
    a.dqkv = plan.add("dqkv", BT * 3 * C, lin_s, OpKind::Linear, scratch);
    a.datty = plan.add("datty", BT * C, y_s, OpKind::AttnValues, scratch);
    a.dfch_gelu = plan.add("dfch_gelu", BT * 4 * C, F32, OpKind::Gelu, scratch);
    a.dfch = plan.add("dfch", BT * 4 * C, lin_op, OpKind::Gelu, scratch);
    a.dlogits_lp = plan.add("dlogits_lp", BT * Vp, policy.dlogits, OpKind::LmHead, scratch);
  } else {
    a.attn_scratch = plan.add("attn_scratch", cpu::attention_scratch_floats(B, T, C, config.n_head), F32,
                              OpKind::Softmax, scratch);
    a.proj_out = plan.add("proj_out", BT * C, F32, OpKind::Linear, scratch);
    a.dresidual = plan.add("dresidual", BT * C, grads, OpKind::Residual, scratch);
    a.dln = plan.add("dln", BT * C, grads, OpKind::LayerNorm, scratch);
    a.dqkv = plan.add("dqkv", BT * 3 * C, F32, OpKind::Linear, scratch);
    a.datty = plan.add("datty", BT * C, F32, OpKind::AttnValues, scratch);
    a.dfch = plan.add("dfch", BT * 4 * C, F32, OpKind::Gelu, scratch);
  }
  if (handles) *handles = std::move(a);
  return plan;
}

void Gpt2::plan(int B, int T) {
  acts_ = gpt2_activation_plan(config_, policy_, B, T, &a_);
  acts_.allocate();
  plan_B_ = B;
  plan_T_ = T;
}

void Gpt2::forward_impl(const int* tokens, int B, int T) {
  MPT_CHECK(B <= plan_B_ && T <= plan_T_, "batch " + std::to_string(B) + "x" + std::to_string(T) +
                                              " exceeds the planned " + std::to_string(plan_B_) + "x" +
                                              std::to_string(plan_T_));
  if (mixed_) {
    copies_.refresh_if_stale(params_.data(), *ws_);
    forward_mixed(tokens, B, T);
    return;
  }
  const int N = B * T, C = config_.n_embd, NH = config_.n_head, Vp = config_.padded_vocab_size;
  const float eps = config_.ln_eps;
  cpu::encoder_forward(acts_.get(a_.encoded), tokens, w_.wte, w_.wpe, B, T, C);
  const float* residual = acts_.get(a_.encoded);
  for (int l = 0; l < config_.n_layer; ++l) {
    const Gpt2LayerTensors& w = w_.layers[l];
    LayerActs& la = a_.layers[l];
    float* ln1 = acts_.get(la.ln1);
    float* qkv = acts_.get(la.qkv);
    float* atty = acts_.get(la.atty);
    float* proj = acts_.get(a_.proj_out);
    float* residual2 = acts_.get(la.residual2);
    float* ln2 = acts_.get(la.ln2);
    float* fch = acts_.get(la.fch);
    float* fch_gelu = acts_.get(la.fch_gelu);
    float* residual3 = acts_.get(la.residual3);

    cpu::layernorm_forward(ln1, acts_.get(la.ln1_mean), acts_.get(la.ln1_rstd), residual, w.ln1_w, w.ln1_b, N, C, eps);
    cpu::matmul_forward(qkv, ln1, w.qkv_w, w.qkv_b, N, C, 3 * C, ctx_);
    cpu::attention_forward(atty, acts_.get(la.att), qkv, acts_.get(a_.attn_scratch), B, T, C, NH, ctx_);
    cpu::matmul_forward(proj, atty, w.attproj_w, w.attproj_b, N, C, C, ctx_);
    cpu::residual_forward(residual2, residual, proj, static_cast<size_t>(N) * C);
    cpu::layernorm_forward(ln2, acts_.get(la.ln2_mean), acts_.get(la.ln2_rstd), residual2, w.ln2_w, w.ln2_b, N, C, eps);
    cpu::matmul_forward(fch, ln2, w.fc_w, w.fc_b, N, C, 4 * C, ctx_);
    cpu::gelu_forward(fch_gelu, fch, static_cast<size_t>(N) * 4 * C);
    cpu::matmul_forward(proj, fch_gelu, w.fcproj_w, w.fcproj_b, N, 4 * C, C, ctx_);
    cpu::residual_forward(residual3, residual2, proj, static_cast<size_t>(N) * C);
    residual = residual3;
  }
  float* lnf = acts_.get(a_.lnf);
  cpu::layernorm_forward(lnf, acts_.get(a_.lnf_mean), acts_.get(a_.lnf_rstd), residual, w_.lnf_w, w_.lnf_b, N, C, eps);
  // logits[N,Vp] = lnf[N,C] · wte[Vp,C]^T
  cpu::gemm(acts_.get(a_.logits), lnf, w_.wte, N, Vp, C, false, true, false, ctx_);
}

float Gpt2::loss_impl(const int* targets, int B, int T, float grad_scale, bool backward) {
  const int N = B * T;
  int valid = 0;
  for (int i = 0; i < N; ++i) valid += targets[i] != -1;
  float* dloss = acts_.get(a_.dloss);
  const float d = valid > 0 ? grad_scale / static_cast<float>(valid) : 0.0f;
  for (int i = 0; i < N; ++i) dloss[i] = d;
  float* logits = acts_.get(a_.logits);
  float* losses = acts_.get(a_.losses);
  // Mixed path with a 16-bit LM-head operand: the loss writes dlogits straight into that
  // operand (one rounding, no fp32 dlogits pass); backward_mixed then uses it as is.
  const StorageType head_op = policy_.dlogits;
  dlogits_lp_ready_ = backward && head_op != StorageType::F32;
  if (dlogits_lp_ready_)
    cpu::crossentropy_forward_backward_typed(losses, acts_.raw(a_.dlogits_lp), head_op, logits, targets, dloss,
                                             N, config_.vocab_size, config_.padded_vocab_size);
  else
    cpu::crossentropy_forward_backward(losses, backward ? logits : nullptr, logits, targets, dloss, N,
                                       config_.vocab_size, config_.padded_vocab_size);
  double sum = 0.0;  // fixed order: deterministic
  for (int i = 0; i < N; ++i) sum += losses[i];
  return valid > 0 ? static_cast<float>(sum / valid) : 0.0f;
}

float Gpt2::forward(const int* tokens, const int* targets, int B, int T) {
  forward_impl(tokens, B, T);
  return targets ? loss_impl(targets, B, T, 1.0f, false) : 0.0f;
}

float Gpt2::forward_backward(const int* tokens, const int* targets, int B, int T, float grad_scale) {
  MPT_CHECK(targets != nullptr, "forward_backward needs targets");
  forward_impl(tokens, B, T);
  const float loss = loss_impl(targets, B, T, grad_scale, true);
  backward_impl(tokens, B, T);
  return loss;
}

float Gpt2::forward_backward_sampled(const int* tokens, int* sampled, int B, int T, float grad_scale, uint64_t seed,
                                     uint64_t counter) {
  MPT_CHECK(sampled != nullptr, "forward_backward_sampled needs a buffer for the sampled labels");
  forward_impl(tokens, B, T);
  const int N = B * T;
  float* dloss = acts_.get(a_.dloss);
  for (int i = 0; i < N; ++i) dloss[i] = grad_scale / static_cast<float>(N);
  float* logits = acts_.get(a_.logits);
  float* losses = acts_.get(a_.losses);
  dlogits_lp_ready_ = false;  // dlogits in place, fp32: backward_mixed converts them
  cpu::crossentropy_sampled_forward_backward(losses, logits, sampled, logits, dloss, N, config_.vocab_size,
                                             config_.padded_vocab_size, seed, counter);
  double sum = 0.0;  // fixed order: deterministic
  for (int i = 0; i < N; ++i) sum += losses[i];
  backward_impl(tokens, B, T);
  return static_cast<float>(sum / N);
}

void Gpt2::backward_impl(const int* tokens, int B, int T) {
  if (mixed_) {
    backward_mixed(tokens, B, T);
    return;
  }
  const int N = B * T, C = config_.n_embd, NH = config_.n_head, Vp = config_.padded_vocab_size;
  const size_t NC = static_cast<size_t>(N) * C;
  const float* dlogits = acts_.get(a_.logits);  // the fused loss wrote dlogits in place
  float* dresidual = acts_.get(a_.dresidual);
  float* dln = acts_.get(a_.dln);
  const float* lnf = acts_.get(a_.lnf);

  // LM head: logits = lnf · wte^T  =>  dlnf = dlogits · wte ; dwte += dlogits^T · lnf
  cpu::gemm(dln, dlogits, w_.wte, N, C, Vp, false, false, false, ctx_);
  cpu::gemm(g_.wte, dlogits, lnf, Vp, C, N, true, false, true, ctx_);

  const float* last_residual = config_.n_layer > 0 ? acts_.get(a_.layers.back().residual3) : acts_.get(a_.encoded);
  std::fill(dresidual, dresidual + NC, 0.0f);
  cpu::layernorm_backward(dresidual, g_.lnf_w, g_.lnf_b, dln, last_residual, w_.lnf_w, acts_.get(a_.lnf_mean),
                          acts_.get(a_.lnf_rstd), N, C);

  // dresidual holds the gradient of the current layer's output; each step below adds
  // into it the contribution that flows around a residual connection.
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const Gpt2LayerTensors& w = w_.layers[l];
    const Gpt2LayerTensors& g = g_.layers[l];
    LayerActs& la = a_.layers[l];
    const float* residual = l == 0 ? acts_.get(a_.encoded) : acts_.get(a_.layers[l - 1].residual3);
    float* dfch = acts_.get(a_.dfch);
    float* dqkv = acts_.get(a_.dqkv);
    float* datty = acts_.get(a_.datty);

    // MLP: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
    std::fill(dfch, dfch + 4 * NC, 0.0f);
    cpu::matmul_backward(dfch, g.fcproj_w, g.fcproj_b, dresidual, acts_.get(la.fch_gelu), w.fcproj_w, N, 4 * C, C,
                         ctx_);
    cpu::gelu_backward(dfch, acts_.get(la.fch), dfch, 4 * NC);
    std::fill(dln, dln + NC, 0.0f);
    cpu::matmul_backward(dln, g.fc_w, g.fc_b, dfch, acts_.get(la.ln2), w.fc_w, N, C, 4 * C, ctx_);
    cpu::layernorm_backward(dresidual, g.ln2_w, g.ln2_b, dln, acts_.get(la.residual2), w.ln2_w,
                            acts_.get(la.ln2_mean), acts_.get(la.ln2_rstd), N, C);

    // Attention: residual2 = residual + attproj(attention(qkv(ln1(residual))))
    std::fill(datty, datty + NC, 0.0f);
    cpu::matmul_backward(datty, g.attproj_w, g.attproj_b, dresidual, acts_.get(la.atty), w.attproj_w, N, C, C, ctx_);
    cpu::attention_backward(dqkv, datty, acts_.get(la.qkv), acts_.get(la.att), acts_.get(a_.attn_scratch), B, T, C,
                            NH, ctx_);
    std::fill(dln, dln + NC, 0.0f);
    cpu::matmul_backward(dln, g.qkv_w, g.qkv_b, dqkv, acts_.get(la.ln1), w.qkv_w, N, C, 3 * C, ctx_);
    cpu::layernorm_backward(dresidual, g.ln1_w, g.ln1_b, dln, residual, w.ln1_w, acts_.get(la.ln1_mean),
                            acts_.get(la.ln1_rstd), N, C);
  }
  cpu::encoder_backward(g_.wte, g_.wpe, dresidual, tokens, B, T, C);
}

const float* Gpt2::logits() { return acts_.get(a_.logits); }
const float* Gpt2::losses() { return acts_.get(a_.losses); }

}  // namespace mptrain
