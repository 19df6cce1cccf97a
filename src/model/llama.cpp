// Llama: tensors, activation plan, weight copies; the passes are in llama_pass.cpp.
#include "model/llama.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace mptrain {

LlamaTensors bind_llama_tensors(const LlamaConfig& config, const ParamTable& table, float* base) {
  auto at = [&](const std::string& name) { return base + table.get(name).offset; };
  LlamaTensors t;
  t.embed = at("model.embed_tokens.weight");
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LlamaLayerTensors layer{at(p + "input_layernorm.weight"),  at(p + "self_attn.q_proj.weight"),
                            at(p + "self_attn.o_proj.weight"), at(p + "post_attention_layernorm.weight"),
                            at(p + llama_mlp_in_name(config)), at(p + "mlp.down_proj.weight")};
    if (config.qk_norm) {
      layer.q_norm = at(p + "self_attn.q_norm.weight");
      layer.k_norm = at(p + "self_attn.k_norm.weight");
    }
    t.layers.push_back(layer);
  }
  t.norm = at("model.norm.weight");
  t.head = config.tie_embeddings ? t.embed : at("lm_head.weight");
  return t;
}

namespace {

GemmReader reader(const ParamSpec& spec, bool tied) {
  if (spec.name == "lm_head.weight") return GemmReader::LmHead;
  // Tied, the embedding table is the head; an untied one is a plain lookup table.
  if (spec.name == "model.embed_tokens.weight") return tied ? GemmReader::LmHead : GemmReader::None;
  return spec.shape.size() == 2 ? GemmReader::Linear : GemmReader::None;
}
GemmReader tied_reader(const ParamSpec& spec) { return reader(spec, true); }
GemmReader untied_reader(const ParamSpec& spec) { return reader(spec, false); }

// The MLP's first product's width: gate | up (SwiGLU) or ReLU²'s up alone.
int mlp_in_width(const LlamaConfig& c) {
  return c.mlp == LlamaMlp::SwiGlu ? 2 * c.intermediate : c.intermediate;
}

}  // namespace

GemmReaderFn llama_gemm_reader(bool tied_head) { return tied_head ? tied_reader : untied_reader; }

ActivationPlan llama_activation_plan(const LlamaConfig& config, const Policy& policy, const Backend& be,
                                     int B, int T, LlamaActs* handles) {
  check_batch_shape(B, T, config.block_size);
  using Role = ActivationPlan::Role;
  constexpr StorageType F32 = StorageType::F32;
  const Role saved = Role::Saved, scratch = Role::Scratch;
  const size_t BT = static_cast<size_t>(B) * T, C = config.n_embd, I = config.intermediate;
  const size_t MI = mlp_in_width(config);
  const size_t QKV = C + 2 * static_cast<size_t>(config.kv_width()), Vp = config.padded_vocab_size;
  const bool mixed = !policy.all_fp32();
  const StorageType ln_s = policy.rule(OpRole::RmsNorm).output, lin_s = policy.rule(OpRole::Linear).output;
  const StorageType probs_s = policy.rule(OpRole::Softmax).saved,
                    y_s = policy.rule(OpRole::AttnValues).output;
  // The MLP's activation: SwiGLU's or ReLU²'s role.
  const OpRole act_role = config.mlp == LlamaMlp::SwiGlu ? OpRole::Swiglu : OpRole::Relu2;
  const StorageType act_s = policy.rule(act_role).output;
  const AttentionBytes att =
      be.attention_bytes(B, T, static_cast<int>(C), config.n_head, attention_dtypes(policy));
  auto words = [](size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); };
  const StorageType stream = policy.residual_stream, grads = policy.activation_grads;

  ActivationPlan plan;
  LlamaActs a{};
  a.encoded = plan.add("encoded", BT * C, stream, OpRole::Embedding, saved);
  // A block's tensors: its own, or (what --recompute names) shared by every block, refilled by
  // the backward (llama_pass.cpp), as GPT-2's.
  const RecomputeSet rc = config.recompute;
  const bool block = rc.has(Recompute::Block), norm = block || rc.has(Recompute::Norm),
             mlp = block || rc.has(Recompute::Mlp), attention = block || rc.has(Recompute::Attention);
  LayerTensors layer(plan);
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const auto add = [&](bool shared, const std::string& name, size_t numel, StorageType t, OpRole op) {
      return layer.add(shared, p, name, numel, t, op);
    };
    LlamaLayerActs la;
    la.ln1 = norm ? add(true, "ln", BT * C, ln_s, OpRole::RmsNorm)
                  : add(false, "ln1", BT * C, ln_s, OpRole::RmsNorm);
    la.ln1_rstd = add(block, "ln1_rstd", BT, F32, OpRole::RmsNorm);
    if (config.qk_norm) {  // the product's output, QK-norm's input; qkv then holds the normed q and k
      la.qkv_raw = add(block, "qkv_raw", BT * QKV, lin_s, OpRole::Linear);
      la.q_rstd = add(block, "q_rstd", BT * config.n_head, F32, OpRole::RmsNorm);
      la.k_rstd = add(block, "k_rstd", BT * config.n_kv_head, F32, OpRole::RmsNorm);
    }
    la.qkv = add(block, "qkv", BT * QKV, lin_s, OpRole::Linear);  // q and k rotated in place
    la.att = add(attention, "att", att.saved / storage_bytes(probs_s), probs_s, OpRole::Softmax);
    la.atty = add(block, "atty", BT * C, y_s, OpRole::AttnValues);
    la.residual2 = add(block, "residual2", BT * C, stream, OpRole::Residual);
    la.ln2 = norm ? la.ln1 : add(false, "ln2", BT * C, ln_s, OpRole::RmsNorm);  // one norm at a time
    la.ln2_rstd = add(block, "ln2_rstd", BT, F32, OpRole::RmsNorm);
    la.gate_up = add(mlp, "gate_up", BT * MI, lin_s, OpRole::Linear);
    la.act = add(mlp, "act", BT * I, act_s, act_role);
    la.residual3 = add(false, "residual3", BT * C, stream, OpRole::Residual);
    a.layers.push_back(la);
  }
  a.lnf = plan.add("lnf", BT * C, ln_s, OpRole::RmsNorm, saved);
  a.lnf_rstd = plan.add("lnf_rstd", BT, F32, OpRole::RmsNorm, saved);
  // The logits become dlogits in place (fused loss): working memory, not state kept for backward.
  a.head.logits = plan.add("logits", BT * Vp, policy.logits, OpRole::LmHead, scratch);
  a.head.losses = plan.add("losses", BT, F32, OpRole::Loss, scratch);
  a.head.dloss = plan.add("dloss", BT, F32, OpRole::Loss, scratch);
  a.attn_scratch = plan.add("attn_scratch", words(att.scratch), F32, OpRole::Softmax, scratch);
  a.gemm_out = be.linear_uses_scratch()
                   ? plan.add("gemm_out", BT * std::max(QKV, MI), F32, OpRole::Linear, scratch)
                   : ActivationPlan::kNone;
  a.dresidual = plan.add("dresidual", BT * C, grads, OpRole::Residual, scratch);
  a.dln = plan.add("dln", BT * C, grads, OpRole::RmsNorm, scratch);
  a.dqkv = plan.add("dqkv", BT * QKV, mixed ? lin_s : F32, OpRole::Linear, scratch);
  a.datty = plan.add("datty", BT * C, mixed ? y_s : F32, OpRole::AttnValues, scratch);
  a.dact = plan.add("dact", BT * I, grads, act_role, scratch);
  // ReLU²'s backward runs in place in dact.
  a.dgate_up = config.mlp == LlamaMlp::SwiGlu ? plan.add("dgate_up", BT * MI, grads, act_role, scratch)
                                              : ActivationPlan::kNone;
  if (mixed) {
    a.dout_lp = plan.add("dout_lp", BT * C, policy.operand(OpRole::Linear), OpRole::Linear, scratch);
    // dlogits beside fp32 logits; 16-bit logits of dlogits' own dtype take them in place.
    a.head.dlogits_lp = policy.dlogits == policy.logits && policy.logits != F32
                            ? ActivationPlan::kNone
                            : plan.add("dlogits_lp", BT * Vp, policy.dlogits, OpRole::LmHead, scratch);
  }
  if (handles) *handles = std::move(a);
  return plan;
}

// `be` is bound, not moved, until ModelCore takes it: the policy is made from it first.
Llama::Llama(const LlamaConfig& config, std::unique_ptr<Backend>&& be, Precision precision)
    : Llama(config, std::move(be), make_policy(precision, {}, be->caps())) {}

Llama::Llama(const LlamaConfig& config, std::unique_ptr<Backend>&& be, const Policy& policy)
    : CausalLm(llama_param_table(config), std::move(be), policy, config.vocab_size, config.padded_vocab_size),
      config_(config) {
  w_ = bind_llama_tensors(config_, table_, params_.data());
  g_ = bind_llama_tensors(config_, table_, grads_.data());
  setup_weight_copies();
}

Llama::~Llama() = default;

int Llama::mlp_in() const { return mlp_in_width(config_); }

void Llama::init_weights(uint64_t seed) { init_params_scaled(seed, config_.init_std, config_.n_layer); }

ActivationPlan Llama::plan_activations(int B, int T) {
  ActivationPlan plan = llama_activation_plan(config_, policy_, *be_, B, T, &a_);
  head_ = a_.head;
  return plan;
}

void Llama::setup_weight_copies() {
  // q | k | v and gate | up are consecutive in the table, so each pair's copies are one operand.
  copies_.setup(table_, llama_gemm_reader(config_.tie_embeddings), policy_, be_->memory());
  auto ref = [&](const std::string& name) { return copies_.ref(table_, name, params_.data()); };
  head_c_ = ref(config_.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  wc_.clear();
  for (int l = 0; l < config_.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    wc_.push_back({ref(p + "self_attn.q_proj.weight"), ref(p + "self_attn.o_proj.weight"),
                   ref(p + llama_mlp_in_name(config_)), ref(p + "mlp.down_proj.weight")});
  }
}

}  // namespace mptrain
