// BERT (Hugging Face's BertForPreTraining, BertForMaskedLM, or BertForSequenceClassification):
// parameter table, activation plan, and the forward and backward passes written out layer by
// layer over the op interface (bert_pass.cpp, no autograd). A classifier's head is NSP's with
// num_labels classes: the pooled [CLS] row through `classifier` (BertInputs::nsp_labels are then
// its class ids, BertStats' nsp_* its loss and accuracy); it has no MLM head.
//
// Layout decision: weights are stored as Hugging Face stores them, nn.Linear's [out, in], and
// every linear reads the transpose through its view (View::t()): checkpoints are plain copies
// under HF names.
// query/key/value are consecutive in the table (weights, then biases), so the three
// projections are one GEMM against a [3C, C] weight. The MLM decoder is tied to the word
// embeddings ([Vp, C], already [out, in]) plus its own bias cls.predictions.bias [Vp].
//
// Post-LN blocks (eps 1e-12), bidirectional attention under a key padding mask, exact erf GELU.
//
// Precision: as Gpt2 (model/gpt2.h), the model reads its precision policy (precision/policy.h)
// for every dtype and runs one forward and backward for all of them (an all-fp32 policy runs the
// backend's kernels with fp32 dtypes, bit for bit the original fp32 path): every GEMM (encoder linears,
// attention's two products, pooler, NSP, MLM transform and decoder) with fp32 accumulation,
// LayerNorm / softmax / loss in fp32, the residual stream (here: the LayerNorm outputs, BERT
// being post-LN) fp32, activations saved in the policy's dtypes, fp32 master parameters and
// gradients. The GEMM weights are read through low-precision copies
// (model/weight_copies.h) with Gpt2's contract: any writer of the parameters goes through the
// non-const params() (or init_weights), which marks the copies stale; the next forward
// refreshes them.
// The MLM head runs only on the masked positions (labels != -1): the loss is the same as
// Hugging Face's, which transforms every position and ignores all but those, at a sixth of
// the head's cost. Loss = mean MLM cross-entropy over masked positions + mean NSP cross-entropy.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "core/param_table.h"
#include "model/activation_plan.h"
#include "model/bert_config.h"
#include "model/model_core.h"
#include "model/policy_backend.h"
#include "precision/policy.h"

namespace mptrain {

// The parameter table for a config, under Hugging Face BertForPreTraining names
// (bert.embeddings.*, bert.encoder.layer.N.*, bert.pooler.*, cls.*; the decoder weight is tied
// to the word embeddings and has no entry of its own), or BertForSequenceClassification's
// (the encoder, bert.pooler.* and classifier.*) when config.num_labels > 0.
ParamTable bert_param_table(const BertConfig& config);
// The head on the pooled row: "cls.seq_relationship" (NSP) or "classifier".
const char* bert_seq_head_name(const BertConfig& config);

// Pointers into a flat buffer laid out by bert_param_table (parameters or their gradients).
struct BertLayerTensors {
  float *qkv_w, *qkv_b;        // [3C, C], [3C]: query | key | value
  float *attout_w, *attout_b;  // attention.output.dense [C, C]
  float *ln1_w, *ln1_b;        // attention.output.LayerNorm
  float *fc_w, *fc_b;          // intermediate.dense [I, C]
  float *fcout_w, *fcout_b;    // output.dense [C, I]
  float *ln2_w, *ln2_b;        // output.LayerNorm
};
struct BertTensors {
  float *word, *pos, *type;  // [Vp, C], [max_position, C], [type_vocab, C]
  float *emb_ln_w, *emb_ln_b;
  std::vector<BertLayerTensors> layers;
  float *pool_w, *pool_b;  // [C, C]; null without a head on the pooled row (BertConfig::pooled)
  float *mlm_w, *mlm_b;    // cls.predictions.transform.dense [C, C]; null in a classifier
  float *mlm_ln_w, *mlm_ln_b;
  float* mlm_bias;  // cls.predictions.bias [Vp]
  // The head on the pooled row: cls.seq_relationship [2, C] (NSP) or classifier [num_labels, C]; null without
  // one.
  float *nsp_w, *nsp_b;
};
inline BertTensors bind_bert_tensors(const ParamTable& table, float* base, int n_layer) {
  auto at = [&](const std::string& name) { return base + table.get(name).offset; };
  auto at_if = [&](const std::string& name) { return table.has(name) ? at(name) : nullptr; };
  BertTensors t;
  t.word = at("bert.embeddings.word_embeddings.weight");
  t.pos = at("bert.embeddings.position_embeddings.weight");
  t.type = at("bert.embeddings.token_type_embeddings.weight");
  t.emb_ln_w = at("bert.embeddings.LayerNorm.weight");
  t.emb_ln_b = at("bert.embeddings.LayerNorm.bias");
  for (int l = 0; l < n_layer; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    const std::string s = p + "attention.self.";
    const size_t CC = table.get(s + "query.weight").numel, C = table.get(s + "query.bias").numel;
    MPT_CHECK(at(s + "key.weight") == at(s + "query.weight") + CC &&
                  at(s + "value.weight") == at(s + "key.weight") + CC &&
                  at(s + "key.bias") == at(s + "query.bias") + C &&
                  at(s + "value.bias") == at(s + "key.bias") + C,
              "BERT parameter table: query/key/value of layer " + std::to_string(l) + " are not consecutive");
    t.layers.push_back({at(s + "query.weight"), at(s + "query.bias"), at(p + "attention.output.dense.weight"),
                        at(p + "attention.output.dense.bias"), at(p + "attention.output.LayerNorm.weight"),
                        at(p + "attention.output.LayerNorm.bias"), at(p + "intermediate.dense.weight"),
                        at(p + "intermediate.dense.bias"), at(p + "output.dense.weight"),
                        at(p + "output.dense.bias"), at(p + "output.LayerNorm.weight"),
                        at(p + "output.LayerNorm.bias")});
  }
  t.pool_w = at_if("bert.pooler.dense.weight");
  t.pool_b = at_if("bert.pooler.dense.bias");
  t.mlm_w = at_if("cls.predictions.transform.dense.weight");
  t.mlm_b = at_if("cls.predictions.transform.dense.bias");
  t.mlm_ln_w = at_if("cls.predictions.transform.LayerNorm.weight");
  t.mlm_ln_b = at_if("cls.predictions.transform.LayerNorm.bias");
  t.mlm_bias = at_if("cls.predictions.bias");
  const std::string seq = table.has("classifier.weight") ? "classifier" : "cls.seq_relationship";
  t.nsp_w = at_if(seq + ".weight");
  t.nsp_b = at_if(seq + ".bias");
  return t;
}

// FLOPs of one training step per token: 6·(matrix-product parameters) with the encoder's
// L·(4C² + 2·C·I) on every token, the MLM head (C² + C·Vp) on masked_fraction of the tokens
// (pooler and NSP are per sequence, negligible), plus 12·L·C·T for bidirectional attention's
// two T×T products (forward 4·T·C per token and layer, backward twice that).
double bert_flops_per_token(const BertConfig& config, int T, double masked_fraction = 0.15);
// What --recompute adds to that per token: the fc linear for `mlp`, the attention's products for
// `attention` (gelu: elementwise only, 0).
double bert_recompute_flops_per_token(const BertConfig& config, int T, RecomputeSet set);

// One micro-batch, as views (data/bert_loader.h's BertBatch owns such arrays; same conventions).
// Pointers to [B,T] ints unless noted; nullable ones say what null means.
struct BertInputs {
  const int* tokens = nullptr;          // ids in [0, V)
  const int* token_types = nullptr;     // segment ids in [0, type_vocab); null = all 0
  const int* attention_mask = nullptr;  // 1 = real token, 0 = padding; null = no padding
  const int* mlm_labels = nullptr;      // original id at masked positions, -1 elsewhere; null = no MLM loss
  // [B]: 0 = B follows A (IsNext), 1 = random (NotNext); a classifier's class ids in [0, num_labels).
  // null = no loss on the pooled row.
  const int* nsp_labels = nullptr;
  // Unpadded (packed) batches: sequence b is rows [cu_seqlens[b], cu_seqlens[b+1]) of tokens,
  // token_types and mlm_labels, which then hold cu_seqlens[B] rows (no padding; each sequence at
  // most T long; attention_mask is not read). Null: B rows of T, padded under attention_mask.
  const int* cu_seqlens = nullptr;  // [B+1] on the host
};

// The rows a packed batch runs on: its cu_seqlens[B] tokens rounded up to kBertPackedRowMultiple
// (at most B·T), so that the GEMMs meet a few shapes, not a new one every batch; the extra rows
// are [PAD] sequences of their own, which no loss reads and so take exactly zero gradient.
inline constexpr int kBertPackedRowMultiple = 32;
int bert_packed_rows(int real_rows, int B, int T);

// Checks one batch before any model reads it: token ids, token types, MLM labels (-1 or a token
// id) and NSP labels (0/1) against `config`, T against its positions and B×T against the plan;
// a packed batch's cu_seqlens (from 0, every sequence 1..T rows).
// Throws Error naming the first bad value and where it is, before any backend reads the batch.
void validate_bert_batch(const BertConfig& config, const BertInputs& batch, int B, int T, int plan_B,
                         int plan_T);

// What one forward measured. Losses are means (0 when there was nothing to average).
struct BertStats {
  float mlm_loss = 0.0f;
  float nsp_loss = 0.0f;
  int mlm_count = 0;    // masked positions
  int mlm_correct = 0;  // of which the arg-max over the real vocabulary is the label
  int nsp_count = 0;    // sequences with an NSP label
  int nsp_correct = 0;
  float loss() const { return mlm_loss + nsp_loss; }
};

// Handles of every activation buffer, filled by bert_activation_plan. The fp32 path uses the
// original set; the 16-bit / TF32 policies add their own (h32, the *_lp GEMM-operand copies, ...).
struct BertLayerActs {
  ActivationPlan::Handle qkv, att, atty, res1, ln1, ln1_mean, ln1_rstd, fch, fch_gelu, res2, ln2, ln2_mean,
      ln2_rstd;
};
struct BertActs {
  ActivationPlan::Handle emb, emb_ln, emb_mean, emb_rstd;
  std::vector<BertLayerActs> layers;
  // heads
  ActivationPlan::Handle cls_in, pooled, nsp_logits, nsp_losses, nsp_dloss;
  ActivationPlan::Handle mlm_in, mlm_t, mlm_tg, mlm_tl, mlm_mean, mlm_rstd, mlm_logits, mlm_losses, mlm_dloss;
  // scratch (not saved for backward)
  // gemm_out: the linears' fp32 accumulator (fp32: proj); dfch_gelu is dfch in fp32
  ActivationPlan::Handle attn_scratch, gemm_out, dh, dres, dqkv, datty, dfch, dfch_gelu, dpooled, dcls_in,
      dmlm_a, dmlm_b;
  // 16-bit / TF32 policies only (kNone in fp32): the fp32 LayerNorm outputs of the residual
  // stream (two, alternating), upstream gradients as GEMM operands, the MLM LayerNorm's input.
  ActivationPlan::Handle h32, dout_lp, dlogits_lp, mlm_tg32;
};

// The activation plan of a B×T micro-batch with at most max_predictions masked positions in all
// (0 = B·T) under `policy`, built without allocating (so that `mptrain explain` and the memory
// estimate report exactly what Bert::plan allocates).
ActivationPlan bert_activation_plan(const BertConfig& config, const Policy& policy, const Backend& be, int B,
                                    int T, int max_predictions, BertActs* handles = nullptr);

// Which GEMM reads a parameter: the word embeddings are the MLM decoder (LmHead), every other
// 2-D weight but the position and token-type tables is a linear; the rest is read by no GEMM.
GemmReader bert_gemm_reader(const ParamSpec& spec);
// Bytes of the low-precision weight copies under `policy` (0 when every GEMM is fp32).
size_t bert_weight_copy_bytes(const BertConfig& config, const Policy& policy);

class Bert : public ModelCore {
 public:
  static constexpr int kNspClasses = 2;  // IsNext, NotNext
  // On backend `be` (its memory holds the parameters, gradients and activations; the policy
  // must be one it runs, else Error naming the op and dtypes): an explicit policy (e.g.
  // make_policy(p, parse_op_precision(...))), or the precision's plan for the backend's caps.
  Bert(const BertConfig& config, std::unique_ptr<Backend>&& be, const Policy& policy);
  Bert(const BertConfig& config, std::unique_ptr<Backend>&& be, Precision precision = Precision::Fp32);
  ~Bert();

  const BertConfig& config() const { return config_; }
  size_t num_hf_params() const;  // as Hugging Face counts them (real rows only)

  // Hugging Face's _init_weights from a seed: N(0, init_std) for linear and embedding weights,
  // zero biases, LayerNorm 1/0; the [PAD] word row and padded vocabulary rows zero.
  void init_weights(uint64_t seed);

  // Plans activations for micro-batches of up to B×T tokens with at most max_predictions
  // masked positions in all (0 = B·T). Throws Error when T exceeds the model's positions.
  void plan(int B, int T, int max_predictions = 0);

  // Forward and the losses. Validates ids (tokens, types, labels) with clear errors.
  BertStats forward(const BertInputs& batch, int B, int T);
  // Forward, then backward with gradients ACCUMULATED (+=) into grads() of grad_scale · loss().
  BertStats forward_backward(const BertInputs& batch, int B, int T, float grad_scale);

  // Sophia-G's Gauss-Newton-Bartlett pass: forward, then the MLM labels at the masked positions
  // (batch.mlm_labels != -1; their values are not read) and, when batch.nsp_labels is set (the
  // loss trains NSP), the NSP labels are drawn from the model's own softmax inside the fused
  // loss (cpu::crossentropy_sampled_forward_backward; MLM rows from (seed, counter), NSP rows
  // from (seed ^ kNspSeedSalt, counter), so the two heads draw independent uniforms); then
  // backward with gradients ACCUMULATED (+=) into grads() of grad_scale · (mean MLM loss + mean
  // NSP loss) on those labels. Returns the stats against the drawn labels; reproducible for
  // one (seed, counter) and independent of the thread count.
  BertStats forward_backward_sampled(const BertInputs& batch, int B, int T, float grad_scale, uint64_t seed,
                                     uint64_t counter);
  static constexpr uint64_t kNspSeedSalt = 0x5deece66dull;
  // Why BERT has no graphs (GPT-2's set_graphs): what `--graphs` is refused with.
  static constexpr const char* kNoGraphs =
      "BERT's pass cannot be captured yet (the MLM head's launches are sized by each batch's masked "
      "positions)";
  // The labels the last forward_backward_sampled drew: MLM ones in mlm_positions() order, NSP [B].
  const std::vector<int>& sampled_mlm_labels() const { return sampled_mlm_; }
  const std::vector<int>& sampled_nsp_labels() const { return sampled_nsp_; }

  // After forward: MLM logits [mlm_count, Vp] at the masked positions, in row-major (b, t)
  // order (valid until the next forward_backward overwrites them with their gradient), and
  // those positions as b·T + t. NSP logits [B, 2]. On the host (downloaded when the backend's
  // memory is not).
  const float* mlm_logits();
  const std::vector<int>& mlm_positions() const { return mlm_pos_; }
  const float* nsp_logits();

 private:
  // What the loss reads as labels: the batch's, or labels drawn from the model (Sophia).
  struct Sampling {
    bool on = false;
    uint64_t seed = 0, counter = 0;
  };
  void validate_batch(const BertInputs& batch, int B, int T) const;
  void collect_masked(const BertInputs& batch, int N);
  // The pass's layout: rows_ and, for a packed batch, the sequences the kernels see (the
  // batch's, then the [PAD] tail's) in packed_cu_ / ids_.cu.
  void set_layout(const BertInputs& batch, int B, int T);
  View cu_seqlens() const { return packed_ ? View::ints(ids_.cu.data(), seqs_ + 1) : View{}; }
  // A pass is staged, enqueued, then read, as GPT-2's (model/gpt2.h): run() stages the batch's
  // ids, labels and each head's per-row loss gradient (stage_ids), enqueues forward_impl,
  // loss_impl and, with backward, backward_impl (no host transfer), then reads the heads' losses,
  // arg-maxes and drawn labels (read_stats).
  BertStats run(const BertInputs& batch, int B, int T, float grad_scale, bool backward,
                const Sampling& sampling);
  void stage_ids(const BertInputs& batch, int B, int T, float grad_scale, bool backward, bool drawn);
  void forward_impl(const BertInputs& batch, int B, int T);
  // Layer l's fc linear and GELU (the forward's, and --recompute mlp's refill), and its attention
  // over qkv (and --recompute attention's).
  void block_fc(int l, int N);
  void block_attention(int l, const BertInputs& batch, int T);
  void refill_mlp(int l, int N);
  // The heads on the last layer's output h: pooler and NSP (BertConfig::nsp), MLM.
  void forward_nsp_head(const View& h, int B);
  void forward_mlm_head(const View& h);
  void loss_impl(const BertInputs& batch, int B, bool backward, const Sampling& sampling);
  void backward_impl(const BertInputs& batch, int B, int T);
  BertStats read_stats(const BertInputs& batch, int B, const Sampling& sampling);
  void setup_weight_copies();
  // nn.Linear's weight gradient [OC, Cin] as the [Cin, OC] view a linear_backward accumulates into.
  View linear_grad(const float* g, std::int64_t oc, std::int64_t cin) { return grad(g, {oc, cin}).t(); }
  // The residual stream k (0 or 1) of N rows: the saved LayerNorm output itself when the GEMMs
  // read fp32 or the stream is 16-bit (a GPU's plan), else half k of h32 (fp32).
  View stream(int k, ActivationPlan::Handle saved, int N);
  // stream (=) LayerNorm(x), and the saved copy in the GEMMs' input dtype when that differs.
  void layernorm_to_stream(const View& stream, ActivationPlan::Handle saved, ActivationPlan::Handle mean,
                           ActivationPlan::Handle rstd, const View& x, const float* g, const float* b, int N);
  // A head (MLM, NSP): its logits, per-row losses and loss gradients, and where its labels and
  // arg-maxes sit in ids_.labels / ids_.best (the MLM head's from 0, the NSP head's after).
  struct Head {
    ActivationPlan::Handle logits, losses, dloss;
    size_t at;
  };
  Head mlm_head() const { return {a_.mlm_logits, a_.mlm_losses, a_.mlm_dloss, 0}; }
  Head nsp_head() const { return {a_.nsp_logits, a_.nsp_losses, a_.nsp_dloss, static_cast<size_t>(plan_M_)}; }
  // Staging: each row's gradient of the head's mean loss, and the labels unless drawn.
  void stage_head(const Head& h, int rows, const int* targets, float grad_scale, bool backward);
  // The fused loss over `rows` rows of `classes` logits (the first `vocab` real), the arg-max
  // taken first; dlogits in place when backward; labels drawn when `drawn`.
  void head_loss(const Head& h, int rows, int classes, int vocab, bool drawn, uint64_t seed, uint64_t counter,
                 bool backward);
  // The download point: the mean loss; the arg-max counted against the labels into *correct;
  // the drawn labels into *sampled when non-null.
  float read_head(const Head& h, int rows, const int* targets, std::vector<int>* sampled, int* correct);

  using LayerActs = BertLayerActs;
  using Acts = BertActs;

  BertConfig config_;
  FloatBuffer mlm_logits32_, nsp_logits32_;  // mlm_logits() and nsp_logits() on the host
  BertTensors w_, g_;
  Acts a_{};
  int plan_M_ = 0;
  int last_batch_ = 0;  // B of the last forward
  // The pass's rows (B·T, or a packed batch's bert_packed_rows) and the sequences its kernels
  // see (B, or a packed batch's B plus its tail's).
  int rows_ = 0, seqs_ = 0;
  bool packed_ = false;
  int real_rows_ = 0;  // a packed batch's own tokens (cu_seqlens[B])
  std::vector<int> packed_cu_, packed_ids_;
  int mlm_rows_ = 0;  // rows the MLM head ran on: the masked ones, then zero rows (see forward_impl)
  std::vector<int> mlm_pos_, mlm_targets_;  // masked positions (b·T + t) and their labels
  std::vector<int> sampled_mlm_, sampled_nsp_;
  // The batch's ids staged in the backend's memory (forward uploads them; the kernels read
  // these), and the host side of a head's per-row loss gradient, losses and arg-maxes.
  struct StagedIds {
    IndexBuffer tokens, types, key_mask, cls_rows, mlm_pos, labels, best, cu;
  } ids_;
  std::vector<float> dloss_host_;
  FloatBuffer losses32_;  // a head's losses on the host (read_head)
  std::vector<int> best_host_;
  // The GEMM weights as their GEMMs read them (copies, or the fp32 masters).
  struct LayerWeights {
    WeightRef qkv, attout, fc, fcout;
  };
  std::vector<LayerWeights> wc_;
  WeightRef word_c_, pool_c_, mlm_c_, nsp_c_;
};

}  // namespace mptrain
