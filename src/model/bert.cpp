// BERT forward and backward on the CPU backend, layer by layer.
#include "model/bert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/ops/gemm_mixed.h"
#include "core/error.h"
#include "core/rng.h"

namespace mptrain {

namespace {
constexpr int kMlmRowMultiple = 64;  // see collect_masked
}  // namespace

ParamTable bert_param_table(const BertConfig& c) {
  validate(c);
  const int64_t C = c.hidden, I = c.intermediate, V = c.vocab_size, Vp = c.padded_vocab_size;
  ParamTable t;
  // No weight decay on biases and LayerNorm parameters (the original recipe's exclusions);
  // every other tensor, embeddings included, decays.
  // A hidden layer's linear (nn.Linear: weight [out, in]); the NSP head is an output head, not a
  // hidden matrix (Muon leaves it to AdamW).
  auto linear = [&](const std::string& p, int64_t out, int64_t in, bool hidden = true) {
    if (hidden)
      t.add_matrix(p + ".weight", {out, in}, InitRule::Normal, MatrixLayout::OutIn);
    else
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
      t.add_matrix(p + "attention.self." + n + ".weight", {C, C}, InitRule::Normal, MatrixLayout::OutIn,
                   QkvRole::Part);
    for (const char* n : {"query", "key", "value"})
      t.add(p + "attention.self." + n + ".bias", {C}, InitRule::Zeros, false);
    linear(p + "attention.output.dense", C, C);
    layernorm(p + "attention.output.LayerNorm");
    linear(p + "intermediate.dense", I, C);
    linear(p + "output.dense", C, I);
    layernorm(p + "output.LayerNorm");
  }
  if (c.pooled()) linear("bert.pooler.dense", C, C);
  if (c.mlm()) {
    linear("cls.predictions.transform.dense", C, C);
    layernorm("cls.predictions.transform.LayerNorm");
    t.add("cls.predictions.bias", {Vp}, InitRule::Zeros, false, {V});
  }
  if (c.pooled()) linear(bert_seq_head_name(c), c.seq_classes(), C, /*hidden=*/false);
  return t;
}

const char* bert_seq_head_name(const BertConfig& c) {
  return c.num_labels > 0 ? "classifier" : "cls.seq_relationship";
}

double bert_flops_per_token(const BertConfig& c, int T, double masked_fraction) {
  const double C = c.hidden, I = c.intermediate, L = c.n_layer, Vp = c.padded_vocab_size;
  const double encoder = L * (4.0 * C * C + 2.0 * C * I);
  const double head = masked_fraction * (C * C + C * Vp);
  return 6.0 * (encoder + head) + 12.0 * L * C * T;
}

double bert_recompute_flops_per_token(const BertConfig& c, int T, RecomputeSet set) {
  const double C = c.hidden, L = c.n_layer;
  return (set.has(Recompute::Mlp) ? L * 2.0 * C * c.intermediate : 0.0) +
         (set.has(Recompute::Attention) ? L * 4.0 * C * T : 0.0);  // bidirectional: both T x T products whole
}

GemmReader bert_gemm_reader(const ParamSpec& spec) {
  if (spec.shape.size() != 2 || spec.name == "bert.embeddings.position_embeddings.weight" ||
      spec.name == "bert.embeddings.token_type_embeddings.weight")
    return GemmReader::None;
  return spec.name == "bert.embeddings.word_embeddings.weight" ? GemmReader::LmHead : GemmReader::Linear;
}

// `be` is bound, not moved, until ModelCore takes it: the policy is made from it first.
Bert::Bert(const BertConfig& config, std::unique_ptr<Backend>&& be, Precision precision)
    : Bert(config, std::move(be), make_policy(precision, {}, be->caps())) {}

Bert::Bert(const BertConfig& config, std::unique_ptr<Backend>&& be, const Policy& policy)
    : ModelCore(bert_param_table(config), std::move(be), policy), config_(config) {
  w_ = bind_bert_tensors(table_, params_.data(), config_.n_layer);
  g_ = bind_bert_tensors(table_, grads_.data(), config_.n_layer);
  setup_weight_copies();
}

Bert::~Bert() = default;

size_t Bert::num_hf_params() const {
  size_t n = 0;
  for (const auto& spec : table_.specs()) n += spec.hf_numel();
  return n;
}

void Bert::init_weights(uint64_t seed) {
  copies_.mark_stale();
  init_params(table_, params_, seed, config_.init_std,
              config_.init_std);  // BERT has no residual scaling
  // nn.Embedding(padding_idx) starts the [PAD] row at zero.
  const int pad = config_.pad_token_id;
  if (pad >= 0 && pad < config_.vocab_size)
    be_->zero(View::f32(w_.word + static_cast<size_t>(pad) * config_.hidden, {config_.hidden}));
}

ActivationPlan bert_activation_plan(const BertConfig& config, const Policy& policy, const Backend& be, int B,
                                    int T, int max_predictions, BertActs* handles) {
  MPT_CHECK(B > 0 && T > 0, "batch size and sequence length must be positive");
  MPT_CHECK(T <= config.max_position, "sequence length " + std::to_string(T) +
                                          " is longer than the BERT model's " +
                                          std::to_string(config.max_position) + " positions");
  const size_t BT = static_cast<size_t>(B) * T, C = config.hidden, I = config.intermediate;
  const size_t Vp = config.padded_vocab_size;
  const size_t M = !config.mlm() ? 0 : max_predictions > 0 ? std::min<size_t>(max_predictions, BT) : BT;
  const bool mixed = !policy.all_fp32();
  ActivationPlan plan;
  // Storage dtypes, all read from the policy (fp32 everywhere in the fp32 path). The op that
  // writes each buffer and whether backward reads it (Saved) or it is reused freely (Scratch)
  // are recorded for `mptrain explain`.
  const StorageType ln_s = policy.rule(OpRole::LayerNorm).output, lin_s = policy.rule(OpRole::Linear).output;
  const StorageType probs_s = policy.rule(OpRole::Softmax).saved,
                    y_s = policy.rule(OpRole::AttnValues).output;
  const StorageType gelu_s = policy.rule(OpRole::Gelu).output;
  // What the attention keeps for backward and its scratch: the backend's choice.
  const AttentionBytes att = be.attention_bytes(B, T, config.hidden, config.n_head, attention_dtypes(policy));
  const StorageType lin_op = policy.operand(OpRole::Linear);
  auto saved = [&](std::string name, size_t n, OpRole op, StorageType t = StorageType::F32) {
    return plan.add(std::move(name), n, t, op, ActivationPlan::Role::Saved);
  };
  auto scratch = [&](std::string name, size_t n, OpRole op, StorageType t = StorageType::F32) {
    return plan.add(std::move(name), n, t, op, ActivationPlan::Role::Scratch);
  };
  auto words = [](size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); };
  const StorageType stream = policy.residual_stream, grads = policy.activation_grads;
  BertActs a{};
  // The MLP's tensors: each layer's own, or (what --recompute names) shared, refilled by the
  // backward (bert_pass.cpp).
  const bool mlp = config.recompute.has(Recompute::Mlp), gelu = mlp || config.recompute.has(Recompute::Gelu),
             attention = config.recompute.has(Recompute::Attention);
  LayerTensors layer(plan);
  a.emb = saved("emb", BT * C, OpRole::Embedding, stream);
  // Under a 16-bit / TF32 policy the LayerNorm outputs saved here are the next GEMMs' inputs in
  // their dtype; the fp32 residual stream lives in h32 (scratch, see bert_pass.cpp).
  a.emb_ln = saved("emb_ln", BT * C, OpRole::LayerNorm, ln_s);
  a.emb_mean = saved("emb_mean", BT, OpRole::LayerNorm);
  a.emb_rstd = saved("emb_rstd", BT, OpRole::LayerNorm);
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string p = "layer." + std::to_string(l) + ".";
    BertLayerActs la;
    la.qkv = saved(p + "qkv", BT * 3 * C, OpRole::Linear, lin_s);
    la.att = layer.add(attention, p, "att", att.saved / storage_bytes(probs_s), probs_s, OpRole::Softmax);
    la.atty = saved(p + "atty", BT * C, OpRole::AttnValues, y_s);
    la.res1 = saved(p + "res1", BT * C, OpRole::Residual, stream);
    la.ln1 = saved(p + "ln1", BT * C, OpRole::LayerNorm, ln_s);
    la.ln1_mean = saved(p + "ln1_mean", BT, OpRole::LayerNorm);
    la.ln1_rstd = saved(p + "ln1_rstd", BT, OpRole::LayerNorm);
    la.fch = layer.add(mlp, p, "fch", BT * I, lin_s, OpRole::Linear);
    la.fch_gelu = layer.add(gelu, p, "fch_gelu", BT * I, gelu_s, OpRole::Gelu);
    la.res2 = saved(p + "res2", BT * C, OpRole::Residual, stream);
    la.ln2 = saved(p + "ln2", BT * C, OpRole::LayerNorm, ln_s);  // the layer's output
    la.ln2_mean = saved(p + "ln2_mean", BT, OpRole::LayerNorm);
    la.ln2_rstd = saved(p + "ln2_rstd", BT, OpRole::LayerNorm);
    a.layers.push_back(la);
  }
  a.cls_in = a.pooled = a.nsp_logits = a.nsp_losses = a.nsp_dloss = ActivationPlan::kNone;
  if (config.pooled()) {
    a.cls_in = saved("cls_in", B * C, OpRole::Linear, ln_s);  // the [CLS] rows of the last layer's output
    a.pooled = saved("pooled", B * C, OpRole::Linear, lin_s);
    // Also dlogits after the fused loss, in the logits' dtype as the MLM head's: a GPU's plan
    // keeps them 16-bit, the dtype its classifier's backward GEMMs take with the pooled rows.
    a.nsp_logits = saved("nsp_logits", B * config.seq_classes(), OpRole::Linear, policy.logits);
    a.nsp_losses = saved("nsp_losses", B, OpRole::Loss);
    a.nsp_dloss = saved("nsp_dloss", B, OpRole::Loss);
  }
  // A classifier has no MLM head (M = 0): its handles stay kNone.
  a.mlm_in = a.mlm_t = a.mlm_tg = a.mlm_tl = a.mlm_mean = a.mlm_rstd = a.mlm_logits = a.mlm_losses =
      a.mlm_dloss = ActivationPlan::kNone;
  if (M > 0) {
    a.mlm_in = saved("mlm_in", M * C, OpRole::Linear, ln_s);  // the masked rows of the last layer's output
    a.mlm_t = saved("mlm_t", M * C, OpRole::Linear, lin_s);
    a.mlm_tg = saved("mlm_tg", M * C, OpRole::Gelu, gelu_s);
    a.mlm_tl = saved("mlm_tl", M * C, OpRole::LayerNorm, ln_s);
    a.mlm_mean = saved("mlm_mean", M, OpRole::LayerNorm);
    a.mlm_rstd = saved("mlm_rstd", M, OpRole::LayerNorm);
    a.mlm_logits =
        saved("mlm_logits", M * Vp, OpRole::LmHead, policy.logits);  // also dlogits after the fused loss
    a.mlm_losses = saved("mlm_losses", M, OpRole::Loss);
    a.mlm_dloss = saved("mlm_dloss", M, OpRole::Loss);
  }
  // An entry of n values only where there are rows (the MLM head's scratch, M = 0 in a classifier).
  auto scratch_if = [&](std::string name, size_t n, OpRole op, StorageType t = StorageType::F32) {
    return n > 0 ? scratch(std::move(name), n, op, t) : ActivationPlan::kNone;
  };
  if (!mixed) {
    a.attn_scratch = scratch("attn_scratch", words(att.scratch), OpRole::AttnScores);
    // One buffer plays two parts in fp32: proj is the fp32 accumulator of the residual
    // epilogues, and GELU's / tanh's backward run in place in dfch, dmlm_b and dpooled.
    a.gemm_out = be.linear_uses_scratch() ? scratch("proj", BT * C, OpRole::Linear) : ActivationPlan::kNone;
    a.dh = scratch("dh", BT * C, OpRole::LayerNorm, grads);
    a.dres = scratch("dres", BT * C, OpRole::LayerNorm, grads);
    a.dqkv = scratch("dqkv", BT * 3 * C, OpRole::AttnScores);
    a.datty = scratch("datty", BT * C, OpRole::Linear);
    a.dfch = scratch("dfch", BT * I, OpRole::Gelu);
    a.dpooled = config.pooled() ? scratch("dpooled", B * C, OpRole::Linear) : ActivationPlan::kNone;
    a.dcls_in = config.pooled() ? scratch("dcls_in", B * C, OpRole::Linear) : ActivationPlan::kNone;
    a.dmlm_a = scratch_if("dmlm_a", M * C, OpRole::Linear);
    a.dmlm_b = scratch_if("dmlm_b", M * C, OpRole::LayerNorm);
    a.dfch_gelu = a.dfch;
    a.h32 = a.dout_lp = a.dlogits_lp = a.mlm_tg32 = ActivationPlan::kNone;
  } else {
    a.attn_scratch = scratch("attn_scratch", words(att.scratch), OpRole::Softmax);
    // fp32 LayerNorm outputs: the residual stream (a GPU's plan keeps it 16-bit: the saved outputs).
    a.h32 = stream == StorageType::F32 ? scratch("h32", 2 * BT * C, OpRole::Residual) : ActivationPlan::kNone;
    a.gemm_out = be.linear_uses_scratch()  // the fp32 GEMM result before bias
                     ? scratch("gemm_out", BT * std::max(3 * C, I), OpRole::Linear)
                     : ActivationPlan::kNone;
    a.mlm_tg32 = stream == StorageType::F32 ? scratch_if("mlm_tg32", M * C, OpRole::LayerNorm)  // the MLM
                                            : ActivationPlan::kNone;  // LayerNorm's input, widened
    a.dh = scratch("dh", BT * C, OpRole::LayerNorm, grads);
    a.dres = scratch("dres", BT * C, OpRole::LayerNorm, grads);
    a.dout_lp = scratch("dout_lp", BT * C, OpRole::Linear, lin_op);  // dres as a GEMM operand
    a.dqkv = scratch("dqkv", BT * 3 * C, OpRole::AttnScores, lin_s);
    a.datty = scratch("datty", BT * C, OpRole::AttnValues, y_s);
    a.dfch_gelu = scratch("dfch_gelu", BT * I, OpRole::Gelu, grads);
    // GELU's / tanh's input gradient as a GEMM operand (encoder FFN, MLM transform, pooler).
    a.dfch = scratch("dfch", std::max({BT * I, M * C, static_cast<size_t>(B) * C}), OpRole::Gelu, lin_op);
    a.dpooled = config.pooled() ? scratch("dpooled", B * C, OpRole::Linear, grads) : ActivationPlan::kNone;
    a.dcls_in = config.pooled() ? scratch("dcls_in", B * C, OpRole::Linear, grads) : ActivationPlan::kNone;
    a.dmlm_a = scratch_if("dmlm_a", M * C, OpRole::Linear, grads);
    a.dmlm_b = scratch_if("dmlm_b", M * C, OpRole::LayerNorm, grads);
    // dlogits rounded once for the decoder's GEMMs; 16-bit logits (a GPU's plan) are their own.
    a.dlogits_lp = policy.dlogits == policy.logits && policy.logits != StorageType::F32
                       ? ActivationPlan::kNone
                       : scratch_if("dlogits_lp", M * Vp, OpRole::LmHead, policy.dlogits);
  }
  if (handles) *handles = std::move(a);
  return plan;
}

size_t bert_weight_copy_bytes(const BertConfig& config, const Policy& policy) {
  return weight_copy_bytes(bert_param_table(config), bert_gemm_reader, policy);
}

void Bert::plan(int B, int T, int max_predictions) {
  acts_ = bert_activation_plan(config_, policy_, *be_, B, T, max_predictions, &a_);
  MemoryResource& memory = be_->memory();
  acts_.allocate(memory);
  const size_t BT = static_cast<size_t>(B) * T;
  plan_B_ = B;
  plan_T_ = T;
  plan_M_ =
      !config_.mlm() ? 0 : static_cast<int>(max_predictions > 0 ? std::min<size_t>(max_predictions, BT) : BT);
  // The MLM head's labels and arg-maxes, then the NSP head's (each read after the pass).
  const size_t head_rows = static_cast<size_t>(plan_M_) + static_cast<size_t>(B);
  for (IndexBuffer* ids : {&ids_.tokens, &ids_.types, &ids_.key_mask}) ids->resize(BT, memory);
  ids_.cls_rows.resize(static_cast<size_t>(B), memory);
  ids_.mlm_pos.resize(static_cast<size_t>(plan_M_), memory);
  ids_.labels.resize(head_rows, memory);
  ids_.best.resize(head_rows, memory);
  // A packed batch's sequences and its tail's (each tail sequence at least one row).
  ids_.cu.resize(static_cast<size_t>(B) + 1 + kBertPackedRowMultiple, memory);
}

int bert_packed_rows(int real_rows, int B, int T) {
  const int m = kBertPackedRowMultiple;
  return std::min(B * T, (real_rows + m - 1) / m * m);
}

void Bert::set_layout(const BertInputs& batch, int B, int T) {
  packed_ = batch.cu_seqlens != nullptr;
  if (!packed_) {
    rows_ = real_rows_ = B * T;
    seqs_ = B;
    return;
  }
  real_rows_ = batch.cu_seqlens[B];
  rows_ = bert_packed_rows(real_rows_, B, T);
  packed_cu_.assign(batch.cu_seqlens, batch.cu_seqlens + B + 1);
  for (int end = real_rows_; end < rows_;) {  // the tail: [PAD] sequences of at most T rows
    end = std::min(rows_, end + T);
    packed_cu_.push_back(end);
  }
  seqs_ = static_cast<int>(packed_cu_.size()) - 1;
  ids_.cu.upload(packed_cu_.data(), packed_cu_.size());
}

void validate_bert_batch(const BertConfig& config, const BertInputs& b, int B, int T, int plan_B,
                         int plan_T) {
  MPT_CHECK(b.tokens != nullptr, "BERT batch without token ids");
  MPT_CHECK(T <= config.max_position, "sequence length " + std::to_string(T) +
                                          " is longer than the BERT model's " +
                                          std::to_string(config.max_position) + " positions");
  MPT_CHECK(B <= plan_B && T <= plan_T, "batch " + std::to_string(B) + "x" + std::to_string(T) +
                                            " exceeds the planned " + std::to_string(plan_B) + "x" +
                                            std::to_string(plan_T));
  const int* cu = b.cu_seqlens;
  if (cu) {
    MPT_CHECK(cu[0] == 0, "packed BERT batch: cu_seqlens starts at " + std::to_string(cu[0]) + ", not 0");
    for (int s = 0; s < B; ++s)
      MPT_CHECK(cu[s + 1] - cu[s] >= 1 && cu[s + 1] - cu[s] <= T,
                "packed BERT batch: sequence " + std::to_string(s) + " has " +
                    std::to_string(cu[s + 1] - cu[s]) + " tokens, not in [1, " + std::to_string(T) + "]");
  }
  const int N = cu ? cu[B] : B * T, V = config.vocab_size;
  auto where = [&](int i) {
    if (cu) {
      const int s = static_cast<int>(std::upper_bound(cu, cu + B + 1, i) - cu) - 1;
      return " at sequence " + std::to_string(s) + ", position " + std::to_string(i - cu[s]);
    }
    return " at sequence " + std::to_string(i / T) + ", position " + std::to_string(i % T);
  };
  for (int i = 0; i < N; ++i) {
    MPT_CHECK(b.tokens[i] >= 0 && b.tokens[i] < V, "token id " + std::to_string(b.tokens[i]) + where(i) +
                                                       " is outside the BERT vocabulary of " +
                                                       std::to_string(V));
    if (b.token_types)
      MPT_CHECK(b.token_types[i] >= 0 && b.token_types[i] < config.type_vocab_size,
                "token type " + std::to_string(b.token_types[i]) + where(i) + " is outside [0, " +
                    std::to_string(config.type_vocab_size) + ")");
    if (b.mlm_labels)
      MPT_CHECK(b.mlm_labels[i] >= -1 && b.mlm_labels[i] < V,
                "masked-LM label " + std::to_string(b.mlm_labels[i]) + where(i) +
                    " is neither -1 nor a token id below " + std::to_string(V));
  }
  MPT_CHECK(!b.mlm_labels || config.mlm(),
            "the batch has masked-LM labels, but a classifier has no MLM head");
  MPT_CHECK(!b.nsp_labels || config.pooled(),
            "the batch has next-sentence labels, but the model has no NSP head (it was built MLM-only)");
  const int classes = config.seq_classes();
  const char* what = config.num_labels > 0 ? "class label " : "next-sentence label ";
  if (b.nsp_labels)
    for (int i = 0; i < B; ++i)
      MPT_CHECK(b.nsp_labels[i] >= 0 && b.nsp_labels[i] < classes,
                what + std::to_string(b.nsp_labels[i]) + " of sequence " + std::to_string(i) +
                    " is outside [0, " + std::to_string(classes) + ")");
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

BertStats Bert::forward(const BertInputs& batch, int B, int T) {
  return run(batch, B, T, 1.0f, false, Sampling{});
}

BertStats Bert::forward_backward(const BertInputs& batch, int B, int T, float grad_scale) {
  return run(batch, B, T, grad_scale, true, Sampling{});
}

BertStats Bert::forward_backward_sampled(const BertInputs& batch, int B, int T, float grad_scale,
                                         uint64_t seed, uint64_t counter) {
  sampled_mlm_.clear();
  sampled_nsp_.clear();
  return run(batch, B, T, grad_scale, true, Sampling{true, seed, counter});
}

const float* Bert::mlm_logits() {
  return acts_.read_f32(a_.mlm_logits, static_cast<size_t>(mlm_rows_) * config_.padded_vocab_size, *be_,
                        mlm_logits32_);
}
const float* Bert::nsp_logits() {
  MPT_CHECK(config_.pooled(), "the model has no NSP head (it was built MLM-only)");
  return acts_.read_f32(a_.nsp_logits, static_cast<size_t>(last_batch_) * config_.seq_classes(), *be_,
                        nsp_logits32_);
}

}  // namespace mptrain
