// BERT forward and backward on the CPU backend, layer by layer.
#include "model/bert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/ops/attention.h"  // saved/scratch sizes
#include "backend/ops/attention_masked.h"
#include "backend/ops/crossentropy.h"
#include "backend/ops/gemm_mixed.h"
#include "backend/ops/embeddings.h"
#include "backend/ops/gelu_erf.h"
#include "backend/ops/layernorm.h"
#include "backend/ops/linear.h"
#include "backend/ops/residual.h"
#include "backend/ops/tanh.h"
#include "core/error.h"
#include "core/rng.h"

namespace mptrain {

namespace {
constexpr int kNspClasses = Bert::kNspClasses;
constexpr int kMlmRowMultiple = 64;  // see collect_masked
}  // namespace

ParamTable bert_param_table(const BertConfig& c) {
  validate(c);
  const int64_t C = c.hidden, I = c.intermediate, V = c.vocab_size, Vp = c.padded_vocab_size;
  ParamTable t;
  // No weight decay on biases and LayerNorm parameters (the original recipe's exclusions);
  // every other tensor, embeddings included, decays.
  auto linear = [&](const std::string& p, int64_t out, int64_t in) {
    t.add(p + ".weight", {out, in}, InitRule::Normal, true);
    t.add(p + ".bias", {out}, InitRule::Zeros, false);
  };
  auto layernorm = [&](const std::string& p) {
    t.add(p + ".weight", {C}, InitRule::Ones, false);
    t.add(p + ".bias", {C}, InitRule::Zeros, false);
  };
  t.add("bert.embeddings.word_embeddings.weight", {Vp, C}, InitRule::NormalRowsThenZeros, true, {V, C});
  t.add("bert.embeddings.position_embeddings.weight", {c.max_position, C}, InitRule::Normal, true);
  t.add("bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, C}, InitRule::Normal, true);
  layernorm("bert.embeddings.LayerNorm");
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    // query, key, value weights then their biases: consecutive, so they form one [3C, C] weight
    // and one [3C] bias (bind_bert_tensors checks it).
    for (const char* n : {"query", "key", "value"})
      t.add(p + "attention.self." + n + ".weight", {C, C}, InitRule::Normal, true);
    for (const char* n : {"query", "key", "value"})
      t.add(p + "attention.self." + n + ".bias", {C}, InitRule::Zeros, false);
    linear(p + "attention.output.dense", C, C);
    layernorm(p + "attention.output.LayerNorm");
    linear(p + "intermediate.dense", I, C);
    linear(p + "output.dense", C, I);
    layernorm(p + "output.LayerNorm");
  }
  linear("bert.pooler.dense", C, C);
  linear("cls.predictions.transform.dense", C, C);
  layernorm("cls.predictions.transform.LayerNorm");
  t.add("cls.predictions.bias", {Vp}, InitRule::Zeros, false, {V});
  linear("cls.seq_relationship", kNspClasses, C);
  return t;
}

double bert_flops_per_token(const BertConfig& c, int T, double masked_fraction) {
  const double C = c.hidden, I = c.intermediate, L = c.n_layer, Vp = c.padded_vocab_size;
  const double encoder = L * (4.0 * C * C + 2.0 * C * I);
  const double head = masked_fraction * (C * C + C * Vp);
  return 6.0 * (encoder + head) + 12.0 * L * C * T;
}

GemmReader bert_gemm_reader(const ParamSpec& spec) {
  if (spec.shape.size() != 2 || spec.name == "bert.embeddings.position_embeddings.weight" ||
      spec.name == "bert.embeddings.token_type_embeddings.weight")
    return GemmReader::None;
  return spec.name == "bert.embeddings.word_embeddings.weight" ? GemmReader::LmHead : GemmReader::Linear;
}

Bert::Bert(const BertConfig& config, cpu::Context& ctx, Precision precision)
    : Bert(config, ctx, make_policy(precision, {}, cpu::GemmWorkspace(ctx).caps())) {}

Bert::Bert(const BertConfig& config, cpu::Context& ctx, const Policy& policy)
    : config_(config),
      ctx_(ctx),
      precision_(policy.precision),
      policy_(policy),
      mixed_(!policy.all_fp32()),
      table_(bert_param_table(config)) {
  check_cpu_runs(policy_);
  params_.resize(table_.total());
  grads_.resize(table_.total());
  w_ = bind_bert_tensors(table_, params_.data(), config_.n_layer);
  g_ = bind_bert_tensors(table_, grads_.data(), config_.n_layer);
  if (mixed_) {
    ws_ = std::make_unique<cpu::GemmWorkspace>(ctx_);
    check_operands_supported(policy_, *ws_);
    copies_.setup(table_, bert_gemm_reader, policy_);
  }
}

Bert::~Bert() = default;

size_t Bert::num_hf_params() const {
  size_t n = 0;
  for (const auto& spec : table_.specs()) n += spec.hf_numel();
  return n;
}

void Bert::init_weights(uint64_t seed) {
  copies_.mark_stale();
  init_params(table_, params_.data(), seed, config_.init_std, config_.init_std);  // BERT has no residual scaling
  // nn.Embedding(padding_idx) starts the [PAD] row at zero.
  const int pad = config_.pad_token_id;
  if (pad >= 0 && pad < config_.vocab_size)
    std::fill(w_.word + static_cast<size_t>(pad) * config_.hidden, w_.word + static_cast<size_t>(pad + 1) * config_.hidden,
              0.0f);
}

ActivationPlan bert_activation_plan(const BertConfig& config, const Policy& policy, int B, int T,
                                    int max_predictions, BertActs* handles) {
  MPT_CHECK(B > 0 && T > 0, "batch size and sequence length must be positive");
  MPT_CHECK(T <= config.max_position, "sequence length " + std::to_string(T) + " is longer than the BERT model's " +
                                          std::to_string(config.max_position) + " positions");
  const size_t BT = static_cast<size_t>(B) * T, C = config.hidden, I = config.intermediate;
  const size_t Vp = config.padded_vocab_size;
  const size_t M = max_predictions > 0 ? std::min<size_t>(max_predictions, BT) : BT;
  const bool mixed = !policy.all_fp32();
  ActivationPlan plan;
  // Storage dtypes, all read from the policy (fp32 everywhere in the fp32 path). The op that
  // writes each buffer and whether backward reads it (Saved) or it is reused freely (Scratch)
  // are recorded for `mptrain explain`.
  const StorageType ln_s = policy.rule(OpKind::LayerNorm).output, lin_s = policy.rule(OpKind::Linear).output;
  const StorageType probs_s = policy.rule(OpKind::Softmax).saved, y_s = policy.rule(OpKind::AttnValues).output;
  const StorageType gelu_s = policy.rule(OpKind::Gelu).output;
  const cpu::AttentionTypes at = attention_types(policy);
  const StorageType lin_op = policy.operand(OpKind::Linear);
  auto saved = [&](std::string name, size_t n, OpKind op, StorageType t = StorageType::F32) {
    return plan.add(std::move(name), n, t, op, ActivationPlan::Role::Saved);
  };
  auto scratch = [&](std::string name, size_t n, OpKind op, StorageType t = StorageType::F32) {
    return plan.add(std::move(name), n, t, op, ActivationPlan::Role::Scratch);
  };
  auto words = [](size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); };
  const StorageType stream = policy.residual_stream, grads = policy.activation_grads;
  BertActs a{};
  a.emb = saved("emb", BT * C, OpKind::Embedding, stream);
  // In the mixed path the LayerNorm outputs saved here are the next GEMMs' low-precision
  // inputs; the fp32 residual stream lives in h32 (scratch, see bert_mixed.cpp).
  a.emb_ln = saved("emb_ln", BT * C, OpKind::LayerNorm, ln_s);
  a.emb_mean = saved("emb_mean", BT, OpKind::LayerNorm);
  a.emb_rstd = saved("emb_rstd", BT, OpKind::LayerNorm);
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string p = "layer." + std::to_string(l) + ".";
    BertLayerActs la;
    la.qkv = saved(p + "qkv", BT * 3 * C, OpKind::Linear, lin_s);
    if (mixed)
      la.att = saved(p + "att", cpu::attention_saved_bytes_typed(B, T, config.hidden, config.n_head, at) /
                                    storage_bytes(probs_s),
                     OpKind::Softmax, probs_s);
    else
      la.att = saved(p + "att", cpu::attention_saved_floats(B, T, config.hidden, config.n_head), OpKind::Softmax);
    la.atty = saved(p + "atty", BT * C, OpKind::AttnValues, y_s);
    la.res1 = saved(p + "res1", BT * C, OpKind::Residual, stream);
    la.ln1 = saved(p + "ln1", BT * C, OpKind::LayerNorm, ln_s);
    la.ln1_mean = saved(p + "ln1_mean", BT, OpKind::LayerNorm);
    la.ln1_rstd = saved(p + "ln1_rstd", BT, OpKind::LayerNorm);
    la.fch = saved(p + "fch", BT * I, OpKind::Linear, lin_s);
    la.fch_gelu = saved(p + "fch_gelu", BT * I, OpKind::Gelu, gelu_s);
    la.res2 = saved(p + "res2", BT * C, OpKind::Residual, stream);
    la.ln2 = saved(p + "ln2", BT * C, OpKind::LayerNorm, ln_s);  // the layer's output
    la.ln2_mean = saved(p + "ln2_mean", BT, OpKind::LayerNorm);
    la.ln2_rstd = saved(p + "ln2_rstd", BT, OpKind::LayerNorm);
    a.layers.push_back(la);
  }
  a.cls_in = saved("cls_in", B * C, OpKind::Linear, ln_s);  // the [CLS] rows of the last layer's output
  a.pooled = saved("pooled", B * C, OpKind::Linear, lin_s);
  a.nsp_logits = saved("nsp_logits", B * kNspClasses, OpKind::Linear);  // also dlogits after the fused loss
  a.nsp_losses = saved("nsp_losses", B, OpKind::Loss);
  a.nsp_dloss = saved("nsp_dloss", B, OpKind::Loss);
  a.mlm_in = saved("mlm_in", M * C, OpKind::Linear, ln_s);  // the masked rows of the last layer's output
  a.mlm_t = saved("mlm_t", M * C, OpKind::Linear, lin_s);
  a.mlm_tg = saved("mlm_tg", M * C, OpKind::Gelu, gelu_s);
  a.mlm_tl = saved("mlm_tl", M * C, OpKind::LayerNorm, ln_s);
  a.mlm_mean = saved("mlm_mean", M, OpKind::LayerNorm);
  a.mlm_rstd = saved("mlm_rstd", M, OpKind::LayerNorm);
  a.mlm_logits = saved("mlm_logits", M * Vp, OpKind::LmHead, policy.logits);  // also dlogits after the fused loss
  a.mlm_losses = saved("mlm_losses", M, OpKind::Loss);
  a.mlm_dloss = saved("mlm_dloss", M, OpKind::Loss);
  if (!mixed) {
    a.attn_scratch = scratch("attn_scratch", cpu::attention_scratch_floats(B, T, config.hidden, config.n_head),
                             OpKind::AttnScores);
    a.proj = scratch("proj", BT * C, OpKind::Linear);
    a.dh = scratch("dh", BT * C, OpKind::LayerNorm, grads);
    a.dres = scratch("dres", BT * C, OpKind::LayerNorm, grads);
    a.dqkv = scratch("dqkv", BT * 3 * C, OpKind::AttnScores);
    a.datty = scratch("datty", BT * C, OpKind::Linear);
    a.dfch = scratch("dfch", BT * I, OpKind::Gelu);
    a.dpooled = scratch("dpooled", B * C, OpKind::Linear);
    a.dcls_in = scratch("dcls_in", B * C, OpKind::Linear);
    a.dmlm_a = scratch("dmlm_a", M * C, OpKind::Linear);
    a.dmlm_b = scratch("dmlm_b", M * C, OpKind::LayerNorm);
  } else {
    a.attn_scratch =
        scratch("attn_scratch", words(cpu::attention_scratch_bytes_typed(B, T, config.hidden, config.n_head, at)),
                OpKind::Softmax);
    a.h32 = scratch("h32", 2 * BT * C, OpKind::Residual);  // fp32 LayerNorm outputs: the residual stream
    a.gemm_out = scratch("gemm_out", BT * std::max(3 * C, I), OpKind::Linear);  // fp32 GEMM result before bias
    a.mlm_tg32 = scratch("mlm_tg32", M * C, OpKind::LayerNorm);  // the MLM LayerNorm's input, widened
    a.dh = scratch("dh", BT * C, OpKind::LayerNorm, grads);
    a.dres = scratch("dres", BT * C, OpKind::LayerNorm, grads);
    a.dout_lp = scratch("dout_lp", BT * C, OpKind::Linear, lin_op);  // dres as a GEMM operand
    a.dqkv = scratch("dqkv", BT * 3 * C, OpKind::AttnScores, lin_s);
    a.datty = scratch("datty", BT * C, OpKind::AttnValues, y_s);
    a.dfch_gelu = scratch("dfch_gelu", BT * I, OpKind::Gelu);
    // GELU's / tanh's input gradient as a GEMM operand (encoder FFN, MLM transform, pooler).
    a.dfch = scratch("dfch", std::max({BT * I, M * C, static_cast<size_t>(B) * C}), OpKind::Gelu, lin_op);
    a.dpooled = scratch("dpooled", B * C, OpKind::Linear);
    a.dcls_in = scratch("dcls_in", B * C, OpKind::Linear);
    a.dmlm_a = scratch("dmlm_a", M * C, OpKind::Linear);
    a.dmlm_b = scratch("dmlm_b", M * C, OpKind::LayerNorm);
    a.dlogits_lp = scratch("dlogits_lp", M * Vp, OpKind::LmHead, policy.dlogits);
  }
  if (handles) *handles = std::move(a);
  return plan;
}

size_t bert_weight_copy_bytes(const BertConfig& config, const Policy& policy) {
  return weight_copy_bytes(bert_param_table(config), bert_gemm_reader, policy);
}

void Bert::plan(int B, int T, int max_predictions) {
  acts_ = bert_activation_plan(config_, policy_, B, T, max_predictions, &a_);
  acts_.allocate();
  const size_t BT = static_cast<size_t>(B) * T;
  plan_B_ = B;
  plan_T_ = T;
  plan_M_ = static_cast<int>(max_predictions > 0 ? std::min<size_t>(max_predictions, BT) : BT);
}

void validate_bert_batch(const BertConfig& config, const BertInputs& b, int B, int T, int plan_B, int plan_T) {
  MPT_CHECK(b.tokens != nullptr, "BERT batch without token ids");
  MPT_CHECK(T <= config.max_position, "sequence length " + std::to_string(T) + " is longer than the BERT model's " +
                                          std::to_string(config.max_position) + " positions");
  MPT_CHECK(B <= plan_B && T <= plan_T, "batch " + std::to_string(B) + "x" + std::to_string(T) +
                                            " exceeds the planned " + std::to_string(plan_B) + "x" +
                                            std::to_string(plan_T));
  const int N = B * T, V = config.vocab_size;
  auto where = [&](int i) { return " at sequence " + std::to_string(i / T) + ", position " + std::to_string(i % T); };
  for (int i = 0; i < N; ++i) {
    MPT_CHECK(b.tokens[i] >= 0 && b.tokens[i] < V, "token id " + std::to_string(b.tokens[i]) + where(i) +
                                                       " is outside the BERT vocabulary of " + std::to_string(V));
    if (b.token_types)
      MPT_CHECK(b.token_types[i] >= 0 && b.token_types[i] < config.type_vocab_size,
                "token type " + std::to_string(b.token_types[i]) + where(i) + " is outside [0, " +
                    std::to_string(config.type_vocab_size) + ")");
    if (b.mlm_labels)
      MPT_CHECK(b.mlm_labels[i] >= -1 && b.mlm_labels[i] < V,
                "masked-LM label " + std::to_string(b.mlm_labels[i]) + where(i) + " is neither -1 nor a token id below " +
                    std::to_string(V));
  }
  if (b.nsp_labels)
    for (int i = 0; i < B; ++i)
      MPT_CHECK(b.nsp_labels[i] == 0 || b.nsp_labels[i] == 1,
                "next-sentence label " + std::to_string(b.nsp_labels[i]) + " of sequence " + std::to_string(i) +
                    " is neither 0 nor 1");
}

void Bert::validate_batch(const BertInputs& b, int B, int T) const {
  validate_bert_batch(config_, b, B, T, plan_B_, plan_T_);
}

void Bert::collect_masked(const BertInputs& batch, int N) {
  mlm_pos_.clear();
  mlm_targets_.clear();
  if (batch.mlm_labels)
    for (int i = 0; i < N; ++i)
      if (batch.mlm_labels[i] != -1) {
        mlm_pos_.push_back(i);
        mlm_targets_.push_back(batch.mlm_labels[i]);
      }
  const int M = static_cast<int>(mlm_pos_.size());
  MPT_CHECK(M <= plan_M_, "the batch has " + std::to_string(M) + " masked positions, more than the planned " +
                              std::to_string(plan_M_));
  // The head runs on M rounded up to a multiple of kMlmRowMultiple rows (zero rows after the
  // masked ones, outside the loss): the number of masked positions changes every batch, and
  // each new GEMM shape would build (and cache) another oneDNN primitive.
  mlm_rows_ = M == 0 ? 0 : std::min(plan_M_, (M + kMlmRowMultiple - 1) / kMlmRowMultiple * kMlmRowMultiple);
}

void Bert::forward_impl(const BertInputs& batch, int B, int T) {
  validate_batch(batch, B, T);
  collect_masked(batch, B * T);
  const int N = B * T, C = config_.hidden, I = config_.intermediate, NH = config_.n_head;
  const float eps = config_.ln_eps;
  const size_t NC = static_cast<size_t>(N) * C;
  // Segment ids default to 0 (a single segment).
  std::vector<int> zeros;
  const int* types = batch.token_types;
  if (!types) {
    zeros.assign(N, 0);
    types = zeros.data();
  }
  if (mixed_) {
    copies_.refresh_if_stale(params_.data(), *ws_);
    forward_mixed(batch, types, B, T);
    return;
  }

  cpu::embeddings_forward(acts_.get(a_.emb), batch.tokens, types, w_.word, w_.pos, w_.type, B, T, C);
  cpu::layernorm_forward(acts_.get(a_.emb_ln), acts_.get(a_.emb_mean), acts_.get(a_.emb_rstd), acts_.get(a_.emb),
                         w_.emb_ln_w, w_.emb_ln_b, N, C, eps);
  const float* h = acts_.get(a_.emb_ln);
  float* proj = acts_.get(a_.proj);
  for (int l = 0; l < config_.n_layer; ++l) {
    const BertLayerTensors& w = w_.layers[l];
    LayerActs& la = a_.layers[l];
    float* qkv = acts_.get(la.qkv);
    float* atty = acts_.get(la.atty);
    float* res1 = acts_.get(la.res1);
    float* ln1 = acts_.get(la.ln1);
    float* fch = acts_.get(la.fch);
    float* fch_gelu = acts_.get(la.fch_gelu);
    float* res2 = acts_.get(la.res2);
    float* ln2 = acts_.get(la.ln2);
    // ln1 = LayerNorm(h + dense(attention(qkv(h))))
    cpu::linear_forward(qkv, h, w.qkv_w, w.qkv_b, N, C, 3 * C, ctx_);
    cpu::attention_masked_forward(atty, acts_.get(la.att), qkv, batch.attention_mask, acts_.get(a_.attn_scratch), B,
                                  T, C, NH, ctx_);
    cpu::linear_forward(proj, atty, w.attout_w, w.attout_b, N, C, C, ctx_);
    cpu::residual_forward(res1, proj, h, NC);
    cpu::layernorm_forward(ln1, acts_.get(la.ln1_mean), acts_.get(la.ln1_rstd), res1, w.ln1_w, w.ln1_b, N, C, eps);
    // ln2 = LayerNorm(ln1 + dense(gelu(dense(ln1))))
    cpu::linear_forward(fch, ln1, w.fc_w, w.fc_b, N, C, I, ctx_);
    cpu::gelu_erf_forward(fch_gelu, fch, static_cast<size_t>(N) * I);
    cpu::linear_forward(proj, fch_gelu, w.fcout_w, w.fcout_b, N, I, C, ctx_);
    cpu::residual_forward(res2, proj, ln1, NC);
    cpu::layernorm_forward(ln2, acts_.get(la.ln2_mean), acts_.get(la.ln2_rstd), res2, w.ln2_w, w.ln2_b, N, C, eps);
    h = ln2;
  }

  // Pooler and NSP: tanh(dense(h[b, 0])) → seq_relationship.
  float* cls_in = acts_.get(a_.cls_in);
  float* pooled = acts_.get(a_.pooled);
  for (int b = 0; b < B; ++b)
    std::memcpy(cls_in + static_cast<size_t>(b) * C, h + static_cast<size_t>(b) * T * C, sizeof(float) * C);
  cpu::linear_forward(pooled, cls_in, w_.pool_w, w_.pool_b, B, C, C, ctx_);
  cpu::tanh_forward(pooled, pooled, static_cast<size_t>(B) * C);
  cpu::linear_forward(acts_.get(a_.nsp_logits), pooled, w_.nsp_w, w_.nsp_b, B, C, kNspClasses, ctx_);

  // MLM head on the masked rows only: dense → GELU → LayerNorm → decoder (word embeddings^T + bias).
  const int M = static_cast<int>(mlm_pos_.size());
  if (M == 0) return;
  const int Mr = mlm_rows_;
  float* mlm_in = acts_.get(a_.mlm_in);
  for (int m = 0; m < M; ++m)
    std::memcpy(mlm_in + static_cast<size_t>(m) * C, h + static_cast<size_t>(mlm_pos_[m]) * C, sizeof(float) * C);
  std::fill(mlm_in + static_cast<size_t>(M) * C, mlm_in + static_cast<size_t>(Mr) * C, 0.0f);
  const size_t MC = static_cast<size_t>(Mr) * C;
  cpu::linear_forward(acts_.get(a_.mlm_t), mlm_in, w_.mlm_w, w_.mlm_b, Mr, C, C, ctx_);
  cpu::gelu_erf_forward(acts_.get(a_.mlm_tg), acts_.get(a_.mlm_t), MC);
  cpu::layernorm_forward(acts_.get(a_.mlm_tl), acts_.get(a_.mlm_mean), acts_.get(a_.mlm_rstd), acts_.get(a_.mlm_tg),
                         w_.mlm_ln_w, w_.mlm_ln_b, Mr, C, eps);
  cpu::linear_forward(acts_.get(a_.mlm_logits), acts_.get(a_.mlm_tl), w_.word, w_.mlm_bias, Mr, C,
                      config_.padded_vocab_size, ctx_);
}

namespace {
// Index of the largest of the first n values (the first one on ties).
int argmax(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}
}  // namespace

BertStats Bert::loss_impl(const BertInputs& batch, int B, int /*T*/, float grad_scale, bool backward,
                          const Sampling& sampling) {
  BertStats st;
  const int V = config_.vocab_size, Vp = config_.padded_vocab_size;
  const int M = static_cast<int>(mlm_pos_.size());
  if (M > 0) {
    float* logits = acts_.get(a_.mlm_logits);
    float* losses = acts_.get(a_.mlm_losses);
    float* dloss = acts_.get(a_.mlm_dloss);
    for (int m = 0; m < M; ++m) dloss[m] = grad_scale / static_cast<float>(M);
    if (sampling.on) {
      // Arg-max before the fused pass overwrites the logits with their gradient.
      std::vector<int> best(M);
      for (int m = 0; m < M; ++m) best[m] = argmax(logits + static_cast<size_t>(m) * Vp, V);
      sampled_mlm_.assign(M, 0);
      cpu::crossentropy_sampled_forward_backward(losses, logits, sampled_mlm_.data(), logits, dloss, M, V, Vp,
                                                 sampling.seed, sampling.counter);
      for (int m = 0; m < M; ++m) st.mlm_correct += best[m] == sampled_mlm_[m];
    } else {
      for (int m = 0; m < M; ++m)
        st.mlm_correct += argmax(logits + static_cast<size_t>(m) * Vp, V) == mlm_targets_[m];
      cpu::crossentropy_forward_backward(losses, backward ? logits : nullptr, logits, mlm_targets_.data(), dloss,
                                         M, V, Vp);
    }
    // The head's padding rows take no gradient.
    if (backward)
      std::fill(logits + static_cast<size_t>(M) * Vp, logits + static_cast<size_t>(mlm_rows_) * Vp, 0.0f);
    double sum = 0.0;  // fixed order: deterministic
    for (int m = 0; m < M; ++m) sum += losses[m];
    st.mlm_loss = static_cast<float>(sum / M);
    st.mlm_count = M;
  }
  float* nsp_logits = acts_.get(a_.nsp_logits);
  if (batch.nsp_labels) {
    float* losses = acts_.get(a_.nsp_losses);
    float* dloss = acts_.get(a_.nsp_dloss);
    for (int b = 0; b < B; ++b) dloss[b] = grad_scale / static_cast<float>(B);
    if (sampling.on) {
      std::vector<int> best(B);
      for (int b = 0; b < B; ++b) best[b] = argmax(nsp_logits + static_cast<size_t>(b) * kNspClasses, kNspClasses);
      sampled_nsp_.assign(B, 0);
      cpu::crossentropy_sampled_forward_backward(losses, nsp_logits, sampled_nsp_.data(), nsp_logits, dloss, B,
                                                 kNspClasses, kNspClasses, sampling.seed ^ kNspSeedSalt,
                                                 sampling.counter);
      for (int b = 0; b < B; ++b) st.nsp_correct += best[b] == sampled_nsp_[b];
    } else {
      for (int b = 0; b < B; ++b)
        st.nsp_correct +=
            argmax(nsp_logits + static_cast<size_t>(b) * kNspClasses, kNspClasses) == batch.nsp_labels[b];
      cpu::crossentropy_forward_backward(losses, backward ? nsp_logits : nullptr, nsp_logits, batch.nsp_labels,
                                         dloss, B, kNspClasses, kNspClasses);
    }
    double sum = 0.0;
    for (int b = 0; b < B; ++b) sum += losses[b];
    st.nsp_loss = static_cast<float>(sum / B);
    st.nsp_count = B;
  } else if (backward) {
    std::fill(nsp_logits, nsp_logits + static_cast<size_t>(B) * kNspClasses, 0.0f);  // no NSP gradient
  }
  return st;
}

BertStats Bert::forward(const BertInputs& batch, int B, int T) {
  forward_impl(batch, B, T);
  return loss_impl(batch, B, T, 1.0f, false, Sampling{});
}

BertStats Bert::forward_backward(const BertInputs& batch, int B, int T, float grad_scale) {
  forward_impl(batch, B, T);
  const BertStats st = loss_impl(batch, B, T, grad_scale, true, Sampling{});
  backward_impl(batch, B, T);
  return st;
}

BertStats Bert::forward_backward_sampled(const BertInputs& batch, int B, int T, float grad_scale, uint64_t seed,
                                         uint64_t counter) {
  forward_impl(batch, B, T);
  sampled_mlm_.clear();
  sampled_nsp_.clear();
  const BertStats st = loss_impl(batch, B, T, grad_scale, true, Sampling{true, seed, counter});
  backward_impl(batch, B, T);
  return st;
}

void Bert::backward_impl(const BertInputs& batch, int B, int T) {
  if (mixed_) {
    std::vector<int> zeros;
    const int* types = batch.token_types;
    if (!types) {
      zeros.assign(static_cast<size_t>(B) * T, 0);
      types = zeros.data();
    }
    backward_mixed(batch, types, B, T);
    return;
  }
  const int N = B * T, C = config_.hidden, I = config_.intermediate, NH = config_.n_head;
  const int Vp = config_.padded_vocab_size;
  const size_t NC = static_cast<size_t>(N) * C;
  const int M = static_cast<int>(mlm_pos_.size());
  float* dh = acts_.get(a_.dh);      // gradient of the current layer's output, then of its input
  float* dres = acts_.get(a_.dres);  // gradient of a residual sum (before a LayerNorm)
  std::fill(dh, dh + NC, 0.0f);

  // MLM head, backwards: logits = tl·word^T + bias; tl = LN(tg); tg = gelu(t); t = dense(mlm_in).
  if (M > 0) {
    const int Mr = mlm_rows_;  // M real rows, then zero rows with zero gradients
    const size_t MC = static_cast<size_t>(Mr) * C;
    float* da = acts_.get(a_.dmlm_a);
    float* db = acts_.get(a_.dmlm_b);
    std::fill(da, da + MC, 0.0f);
    cpu::linear_backward(da, g_.word, g_.mlm_bias, acts_.get(a_.mlm_logits), acts_.get(a_.mlm_tl), w_.word, Mr, C, Vp,
                         ctx_);
    std::fill(db, db + MC, 0.0f);
    cpu::layernorm_backward(db, g_.mlm_ln_w, g_.mlm_ln_b, da, acts_.get(a_.mlm_tg), w_.mlm_ln_w, acts_.get(a_.mlm_mean),
                            acts_.get(a_.mlm_rstd), Mr, C);
    cpu::gelu_erf_backward(db, acts_.get(a_.mlm_t), db, MC);
    std::fill(da, da + MC, 0.0f);
    cpu::linear_backward(da, g_.mlm_w, g_.mlm_b, db, acts_.get(a_.mlm_in), w_.mlm_w, Mr, C, C, ctx_);
    for (int m = 0; m < M; ++m) {  // positions are distinct: a plain scatter
      float* dst = dh + static_cast<size_t>(mlm_pos_[m]) * C;
      const float* src = da + static_cast<size_t>(m) * C;
      for (int c = 0; c < C; ++c) dst[c] += src[c];
    }
  }

  // NSP and pooler, backwards: nsp = seq_relationship(pooled); pooled = tanh(dense(h[b, 0])).
  if (batch.nsp_labels) {
    const size_t BC = static_cast<size_t>(B) * C;
    float* dpooled = acts_.get(a_.dpooled);
    float* dcls = acts_.get(a_.dcls_in);
    std::fill(dpooled, dpooled + BC, 0.0f);
    cpu::linear_backward(dpooled, g_.nsp_w, g_.nsp_b, acts_.get(a_.nsp_logits), acts_.get(a_.pooled), w_.nsp_w, B, C,
                         kNspClasses, ctx_);
    cpu::tanh_backward(dpooled, acts_.get(a_.pooled), dpooled, BC);
    std::fill(dcls, dcls + BC, 0.0f);
    cpu::linear_backward(dcls, g_.pool_w, g_.pool_b, dpooled, acts_.get(a_.cls_in), w_.pool_w, B, C, C, ctx_);
    for (int b = 0; b < B; ++b) {
      float* dst = dh + static_cast<size_t>(b) * T * C;
      const float* src = dcls + static_cast<size_t>(b) * C;
      for (int c = 0; c < C; ++c) dst[c] += src[c];
    }
  }

  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const BertLayerTensors& w = w_.layers[l];
    const BertLayerTensors& g = g_.layers[l];
    LayerActs& la = a_.layers[l];
    const float* h_in = l == 0 ? acts_.get(a_.emb_ln) : acts_.get(a_.layers[l - 1].ln2);
    float* dfch = acts_.get(a_.dfch);
    float* dqkv = acts_.get(a_.dqkv);
    float* datty = acts_.get(a_.datty);

    // ln2 = LN(res2), res2 = ln1 + fcout(gelu(fc(ln1)))
    std::fill(dres, dres + NC, 0.0f);
    cpu::layernorm_backward(dres, g.ln2_w, g.ln2_b, dh, acts_.get(la.res2), w.ln2_w, acts_.get(la.ln2_mean),
                            acts_.get(la.ln2_rstd), N, C);
    std::memcpy(dh, dres, sizeof(float) * NC);  // the residual path into ln1
    std::fill(dfch, dfch + static_cast<size_t>(N) * I, 0.0f);
    cpu::linear_backward(dfch, g.fcout_w, g.fcout_b, dres, acts_.get(la.fch_gelu), w.fcout_w, N, I, C, ctx_);
    cpu::gelu_erf_backward(dfch, acts_.get(la.fch), dfch, static_cast<size_t>(N) * I);
    cpu::linear_backward(dh, g.fc_w, g.fc_b, dfch, acts_.get(la.ln1), w.fc_w, N, C, I, ctx_);

    // ln1 = LN(res1), res1 = h_in + attout(attention(qkv(h_in)))
    std::fill(dres, dres + NC, 0.0f);
    cpu::layernorm_backward(dres, g.ln1_w, g.ln1_b, dh, acts_.get(la.res1), w.ln1_w, acts_.get(la.ln1_mean),
                            acts_.get(la.ln1_rstd), N, C);
    std::memcpy(dh, dres, sizeof(float) * NC);  // the residual path into h_in
    std::fill(datty, datty + NC, 0.0f);
    cpu::linear_backward(datty, g.attout_w, g.attout_b, dres, acts_.get(la.atty), w.attout_w, N, C, C, ctx_);
    cpu::attention_masked_backward(dqkv, datty, acts_.get(la.qkv), acts_.get(la.att), acts_.get(a_.attn_scratch), B,
                                   T, C, NH, ctx_);
    cpu::linear_backward(dh, g.qkv_w, g.qkv_b, dqkv, h_in, w.qkv_w, N, C, 3 * C, ctx_);
  }

  // Embeddings: emb_ln = LN(word + type + pos)
  float* demb = dres;
  std::fill(demb, demb + NC, 0.0f);
  cpu::layernorm_backward(demb, g_.emb_ln_w, g_.emb_ln_b, dh, acts_.get(a_.emb), w_.emb_ln_w, acts_.get(a_.emb_mean),
                          acts_.get(a_.emb_rstd), N, C);
  std::vector<int> zeros;
  const int* types = batch.token_types;
  if (!types) {
    zeros.assign(N, 0);
    types = zeros.data();
  }
  cpu::embeddings_backward(g_.word, g_.pos, g_.type, demb, batch.tokens, types, config_.pad_token_id, B, T, C);
}

const float* Bert::mlm_logits() { return acts_.get(a_.mlm_logits); }
const float* Bert::nsp_logits() { return acts_.get(a_.nsp_logits); }

}  // namespace mptrain
