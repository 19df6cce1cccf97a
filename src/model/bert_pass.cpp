// BERT's forward, losses and backward (BertForPreTraining), written once over the op interface
// (backend/backend.h) for every precision, as PyTorch autocast runs Hugging Face's model: each
// tensor in the dtype the policy gives it, each GEMM weight read through its copy.
//
// BERT is post-LN, so the residual stream is the LayerNorm outputs. On the CPU's plan a
// LayerNorm writes the fp32 stream; when the GEMMs read another dtype the plan has a separate
// fp32 stream (h32, two alternating buffers) and the saved LayerNorm output is its cast
// (autocast casts the fp32 LayerNorm output for the linear: the same values). A GPU's plan keeps
// the stream 16-bit: the saved LayerNorm outputs are the stream. Per layer, forward:
//   qkv  = round(h·Wqkv^T + b)               y = masked attention(qkv)
//   res1 = h + round(y·Wo^T + b)              ln1 = LN(res1)
//   fch  = round(ln1·Wfc^T + b); g = gelu_erf(fch)
//   res2 = ln1 + round(g·Wout^T + b)          ln2 = LN(res2)
// Heads: the pooler tanh(round(h[CLS]·Wp^T + b)) and NSP logits; the MLM transform, its
// LayerNorm and the decoder (word embeddings^T + bias) on the masked rows only; MLM logits in
// the policy's dtype (fp32 on the CPU's plan, 16-bit on a GPU's), which the fused cross-entropy
// overwrites with dlogits in place; NSP logits fp32.
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "model/bert.h"

namespace mptrain {

namespace {

// nn.Linear's weight [OC, Cin] as the [Cin, OC] operand a linear multiplies by.
View linear_weight(const WeightRef& w, std::int64_t oc, std::int64_t cin) {
  return View::of(w.ptr, w.type, {oc, cin}).t();
}

// The rows of each sequence's [CLS] token: b·T, or a packed sequence's first.
std::vector<int> cls_rows(int B, int T, const int* cu_seqlens) {
  std::vector<int> rows(static_cast<size_t>(B));
  for (int b = 0; b < B; ++b) rows[static_cast<size_t>(b)] = cu_seqlens ? cu_seqlens[b] : b * T;
  return rows;
}

}  // namespace

void Bert::setup_weight_copies() {
  copies_.setup(table_, bert_gemm_reader, policy_, be_->memory());
  auto ref = [&](const std::string& name) { return copies_.ref(table_, name, params_.data()); };
  wc_.clear();
  for (int l = 0; l < config_.n_layer; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    // query | key | value are consecutive in the table, so their copies are one [3C, C] operand.
    wc_.push_back({ref(p + "attention.self.query.weight"), ref(p + "attention.output.dense.weight"),
                   ref(p + "intermediate.dense.weight"), ref(p + "output.dense.weight")});
  }
  word_c_ = ref("bert.embeddings.word_embeddings.weight");
  if (config_.mlm()) mlm_c_ = ref("cls.predictions.transform.dense.weight");
  if (config_.pooled()) {
    pool_c_ = ref("bert.pooler.dense.weight");
    nsp_c_ = ref(std::string(bert_seq_head_name(config_)) + ".weight");
  }
}

View Bert::stream(int k, ActivationPlan::Handle saved, int N) {
  const std::int64_t C = config_.hidden;
  if (a_.h32 == ActivationPlan::kNone) return acts_.view(saved, N, C);
  return View::of(static_cast<float*>(acts_.raw(a_.h32)) + static_cast<size_t>(k) * N * C, StorageType::F32,
                  {N, C});
}

void Bert::layernorm_to_stream(const View& stream, ActivationPlan::Handle saved, ActivationPlan::Handle mean,
                               ActivationPlan::Handle rstd, const View& x, const float* g, const float* b,
                               int N) {
  layernorm(stream, x, g, b, mean, rstd, config_.ln_eps);
  const View copy = acts_.view(saved, N, config_.hidden);
  if (copy.ptr != stream.ptr) be_->cast(copy, stream);  // the GEMMs' input dtype
}

void Bert::stage_ids(const BertInputs& batch, int B, int T, float grad_scale, bool backward, bool drawn) {
  validate_batch(batch, B, T);
  set_layout(batch, B, T);
  collect_masked(batch, real_rows_);
  copies_.refresh_if_stale(params_.data(), *be_);
  last_batch_ = B;
  const auto N = static_cast<size_t>(real_rows_);
  // Without segment ids every token is in segment 0; a packed batch's tail rows are [PAD]s of
  // segment 0.
  ids_.types.zero();
  if (rows_ > real_rows_) {
    packed_ids_.assign(static_cast<size_t>(rows_ - real_rows_), config_.pad_token_id);
    ids_.tokens.upload(packed_ids_.data(), packed_ids_.size(), N);
  }
  ids_.tokens.upload(batch.tokens, N);
  if (batch.token_types) ids_.types.upload(batch.token_types, N);
  if (batch.attention_mask && !packed_) ids_.key_mask.upload(batch.attention_mask, N);
  const std::vector<int> cls = cls_rows(B, T, batch.cu_seqlens);
  ids_.cls_rows.upload(cls.data(), cls.size());
  if (!mlm_pos_.empty()) ids_.mlm_pos.upload(mlm_pos_.data(), mlm_pos_.size());
  const int M = static_cast<int>(mlm_pos_.size());
  if (M > 0) stage_head(mlm_head(), M, drawn ? nullptr : mlm_targets_.data(), grad_scale, backward);
  if (batch.nsp_labels) stage_head(nsp_head(), B, drawn ? nullptr : batch.nsp_labels, grad_scale, backward);
}

BertStats Bert::run(const BertInputs& batch, int B, int T, float grad_scale, bool backward,
                    const Sampling& sampling) {
  stage_ids(batch, B, T, grad_scale, backward, sampling.on);
  forward_impl(batch, B, T);
  loss_impl(batch, B, backward, sampling);
  if (backward) backward_impl(batch, B, T);
  return read_stats(batch, B, sampling);
}

// The layer's fc linear and its (exact) GELU in one epilogue: fch_gelu and its input fch from ln1.
void Bert::block_fc(int l, int N) {
  const int C = config_.hidden, I = config_.intermediate;
  const LayerActs& la = a_.layers[l];
  linear({.out = acts_.view(la.fch_gelu, N, I),
          .x = acts_.view(la.ln1, N, C),
          .w = linear_weight(wc_[l].fc, I, C),
          .bias = small(w_.layers[l].fc_b, {I}),
          .epilogue = Epilogue::BiasGeluErf,
          .pre = acts_.view(la.fch, N, I),
          .scratch = acts_.work(a_.gemm_out)});
}

// Bidirectional, under the batch's key mask when padded, over its sequences when packed.
void Bert::block_attention(int l, const BertInputs& batch, int T) {
  const int N = rows_, C = config_.hidden;
  const LayerActs& la = a_.layers[l];
  attention(acts_.view(la.atty, N, C), acts_.view(la.qkv, N, 3 * C), la.att, a_.attn_scratch, seqs_, T,
            config_.n_head, /*causal=*/false,
            batch.attention_mask && !packed_ ? View::ints(ids_.key_mask.data(), N) : View{}, cu_seqlens());
}

// --recompute: the MLP's tensors the forward did not keep, through its own ops (the same bits):
// the fc linear again, or the GELU of its saved output.
void Bert::refill_mlp(int l, int N) {
  const LayerActs& la = a_.layers[l];
  const int I = config_.intermediate;
  if (config_.recompute.has(Recompute::Mlp))
    block_fc(l, N);
  else if (config_.recompute.has(Recompute::Gelu))
    be_->gelu({.out = acts_.view(la.fch_gelu, N, I), .x = acts_.view(la.fch, N, I), .erf = true});
}

void Bert::forward_impl(const BertInputs& batch, int B, int T) {
  Backend& be = *be_;
  const int N = rows_, C = config_.hidden, I = config_.intermediate;
  const int Vp = config_.padded_vocab_size;
  const View acc = acts_.work(a_.gemm_out);

  be.embedding({.out = acts_.view(a_.emb, N, C),
                .tokens = View::ints(ids_.tokens.data(), N),
                .B = seqs_,
                .T = T,
                .cu_seqlens = cu_seqlens(),
                // A GPU's plan reads the word table through the decoder's 16-bit copy.
                .word = policy_.small_weights == StorageType::F32
                            ? View::f32(w_.word, {Vp, C})
                            : View::of(word_c_.ptr, word_c_.type, {Vp, C}),
                .pos = small(w_.pos, {config_.max_position, C}),
                .types = View::ints(ids_.types.data(), N),
                .type_table = small(w_.type, {config_.type_vocab_size, C})});
  View h = stream(0, a_.emb_ln, N);
  layernorm_to_stream(h, a_.emb_ln, a_.emb_mean, a_.emb_rstd, acts_.view(a_.emb, N, C), w_.emb_ln_w,
                      w_.emb_ln_b, N);
  ActivationPlan::Handle h_saved = a_.emb_ln;
  for (int l = 0; l < config_.n_layer; ++l) {
    const BertLayerTensors& w = w_.layers[l];
    const LayerWeights& wc = wc_[l];
    const LayerActs& la = a_.layers[l];
    const View qkv = acts_.view(la.qkv, N, 3 * C), atty = acts_.view(la.atty, N, C);
    // ln1 = LayerNorm(h + dense(attention(qkv(h))))
    linear({.out = qkv,
            .x = acts_.view(h_saved, N, C),
            .w = linear_weight(wc.qkv, 3 * C, C),
            .bias = small(w.qkv_b, {3 * C}),
            .scratch = acc});
    block_attention(l, batch, T);
    linear({.out = acts_.view(la.res1, N, C),
            .x = atty,
            .w = linear_weight(wc.attout, C, C),
            .bias = small(w.attout_b, {C}),
            .epilogue = Epilogue::BiasResidual,
            .residual = h,
            .scratch = acc});
    const View h1 = stream(1, la.ln1, N);
    layernorm_to_stream(h1, la.ln1, la.ln1_mean, la.ln1_rstd, acts_.view(la.res1, N, C), w.ln1_w, w.ln1_b, N);
    // ln2 = LayerNorm(ln1 + dense(gelu(dense(ln1))))
    block_fc(l, N);
    linear({.out = acts_.view(la.res2, N, C),
            .x = acts_.view(la.fch_gelu, N, I),
            .w = linear_weight(wc.fcout, C, I),
            .bias = small(w.fcout_b, {C}),
            .epilogue = Epilogue::BiasResidual,
            .residual = h1,
            .scratch = acc});
    h = stream(0, la.ln2, N);
    layernorm_to_stream(h, la.ln2, la.ln2_mean, la.ln2_rstd, acts_.view(la.res2, N, C), w.ln2_w, w.ln2_b, N);
    h_saved = la.ln2;
  }

  if (config_.pooled()) forward_nsp_head(h, B);
  forward_mlm_head(h);
}

// Pooler and NSP: tanh(dense(h[b, 0])) → seq_relationship (fp32 logits).
void Bert::forward_nsp_head(const View& h, int B) {
  Backend& be = *be_;
  const int C = config_.hidden, K = config_.seq_classes();
  const View acc = acts_.work(a_.gemm_out);
  const View cls_in = acts_.view(a_.cls_in, B, C), pooled = acts_.view(a_.pooled, B, C);
  be.gather_rows(cls_in, h, View::ints(ids_.cls_rows.data(), B));
  linear({.out = pooled,
          .x = cls_in,
          .w = linear_weight(pool_c_, C, C),
          .bias = small(w_.pool_b, {C}),
          .epilogue = Epilogue::BiasTanh,
          .scratch = acc});
  linear({.out = acts_.view(a_.nsp_logits, B, K),
          .x = pooled,
          .w = linear_weight(nsp_c_, K, C),
          .bias = small(w_.nsp_b, {K})});
}

void Bert::forward_mlm_head(const View& h) {
  Backend& be = *be_;
  const int C = config_.hidden, Vp = config_.padded_vocab_size;
  const View acc = acts_.work(a_.gemm_out);
  // MLM head on the masked rows only (mlm_rows_ of them: zero rows after the masked ones).
  const int M = static_cast<int>(mlm_pos_.size());
  if (M == 0) return;
  const int Mr = mlm_rows_;
  const View mlm_in = acts_.view(a_.mlm_in, Mr, C), tl = acts_.view(a_.mlm_tl, Mr, C);
  be.gather_rows(mlm_in, h, View::ints(ids_.mlm_pos.data(), M));
  linear({.out = acts_.view(a_.mlm_tg, Mr, C),
          .x = mlm_in,
          .w = linear_weight(mlm_c_, C, C),
          .bias = small(w_.mlm_b, {C}),
          .epilogue = Epilogue::BiasGeluErf,
          .pre = acts_.view(a_.mlm_t, Mr, C),
          .scratch = acc});
  // The transform's LayerNorm reads fp32 (autocast: a 16-bit GELU output into an fp32 LayerNorm).
  View tg = acts_.view(a_.mlm_tg, Mr, C);
  if (a_.mlm_tg32 != ActivationPlan::kNone) {
    be.cast(acts_.view(a_.mlm_tg32, Mr, C), tg);
    tg = acts_.view(a_.mlm_tg32, Mr, C);
  }
  layernorm(tl, tg, w_.mlm_ln_w, w_.mlm_ln_b, a_.mlm_mean, a_.mlm_rstd, config_.ln_eps);
  // logits[Mr,Vp] (fp32) = tl·word^T + bias, in the LM head's arithmetic.
  linear({.out = acts_.view(a_.mlm_logits, Mr, Vp),
          .x = tl,
          .w = linear_weight(word_c_, Vp, C),
          .bias = small(w_.mlm_bias, {Vp})},
         OpRole::LmHead);
}

void Bert::stage_head(const Head& h, int rows, const int* targets, float grad_scale, bool backward) {
  const auto n = static_cast<size_t>(rows);
  if (backward) {
    dloss_host_.assign(n, grad_scale / static_cast<float>(rows));
    be_->upload(acts_.row(h.dloss, rows), dloss_host_.data());
  }
  if (targets) ids_.labels.upload(targets, n, h.at);
}

void Bert::head_loss(const Head& h, int rows, int classes, int vocab, bool drawn, uint64_t seed,
                     uint64_t counter, bool backward) {
  Backend& be = *be_;
  const View x = acts_.view(h.logits, rows, classes);
  const View labels = View::ints(ids_.labels.data() + h.at, rows);
  // Arg-max before the fused pass overwrites the logits with their gradient.
  be.argmax_rows(View::ints(ids_.best.data() + h.at, rows), x, vocab);
  CrossEntropyArgs a;
  a.losses = acts_.row(h.losses, rows);
  a.logits = x;
  if (backward) {
    a.dlogits = x;
    a.dloss = acts_.row(h.dloss, rows);  // staged
  }
  if (!drawn) a.targets = labels;
  a.vocab = vocab;
  if (drawn) {
    a.sampled = labels;
    a.seed = seed;
    a.counter = counter;
  }
  be.cross_entropy(a);
}

float Bert::read_head(const Head& h, int rows, const int* targets, std::vector<int>* sampled, int* correct) {
  const auto n = static_cast<size_t>(rows);
  best_host_.resize(n);
  ids_.best.download(best_host_.data(), n, h.at);
  if (sampled) {
    sampled->resize(n);
    ids_.labels.download(sampled->data(), n, h.at);
  }
  const float* losses = acts_.read_f32(h.losses, n, *be_, losses32_);  // the buffer itself on the CPU
  const int* labels = sampled ? sampled->data() : targets;
  for (size_t r = 0; r < n; ++r) *correct += best_host_[r] == labels[r];
  double sum = 0.0;  // fixed order: deterministic
  for (size_t r = 0; r < n; ++r) sum += losses[r];
  return static_cast<float>(sum / rows);
}

void Bert::loss_impl(const BertInputs& batch, int B, bool backward, const Sampling& sampling) {
  const int V = config_.vocab_size, Vp = config_.padded_vocab_size;
  const int M = static_cast<int>(mlm_pos_.size());
  if (M > 0) {
    head_loss(mlm_head(), M, Vp, V, sampling.on, sampling.seed, sampling.counter, backward);
    // The head's padding rows take no gradient.
    if (backward && mlm_rows_ > M)
      be_->zero(View::of(static_cast<char*>(acts_.raw(a_.mlm_logits)) +
                             static_cast<size_t>(M) * Vp * storage_bytes(acts_.type(a_.mlm_logits)),
                         acts_.type(a_.mlm_logits), {mlm_rows_ - M, Vp}));
  }
  if (batch.nsp_labels)
    head_loss(nsp_head(), B, config_.seq_classes(), config_.seq_classes(), sampling.on,
              sampling.seed ^ kNspSeedSalt, sampling.counter, backward);
  else if (backward && config_.pooled())
    be_->zero(acts_.view(a_.nsp_logits, B, config_.seq_classes()));  // no NSP gradient
}

BertStats Bert::read_stats(const BertInputs& batch, int B, const Sampling& sampling) {
  BertStats st;
  const int M = static_cast<int>(mlm_pos_.size());
  if (M > 0) {
    st.mlm_loss =
        read_head(mlm_head(), M, mlm_targets_.data(), sampling.on ? &sampled_mlm_ : nullptr, &st.mlm_correct);
    st.mlm_count = M;
  }
  if (batch.nsp_labels) {
    st.nsp_loss =
        read_head(nsp_head(), B, batch.nsp_labels, sampling.on ? &sampled_nsp_ : nullptr, &st.nsp_correct);
    st.nsp_count = B;
  }
  return st;
}

void Bert::backward_impl(const BertInputs& batch, int B, int T) {
  Backend& be = *be_;
  const int N = rows_, C = config_.hidden, I = config_.intermediate, NH = config_.n_head;
  const int K = config_.seq_classes();
  const int Vp = config_.padded_vocab_size;
  const int M = static_cast<int>(mlm_pos_.size());
  const View dh = acts_.view(a_.dh, N, C);      // gradient of the current layer's output, then of its input
  const View dres = acts_.view(a_.dres, N, C);  // gradient of a residual sum (before a LayerNorm)
  be.zero(dh);
  wgrads_.begin(be);  // a GPU's plan: this micro-batch's 16-bit weight gradients start at 0

  // MLM head, backwards: logits = tl·word^T + bias; tl = LN(tg); tg = gelu(t); t = dense(mlm_in).
  if (M > 0) {
    const int Mr = mlm_rows_;  // M real rows, then zero rows with zero gradients
    const View da = acts_.view(a_.dmlm_a, Mr, C), db = acts_.view(a_.dmlm_b, Mr, C);
    linear_backward({.dx = da,
                     .dw = linear_grad(g_.word, Vp, C),
                     .db = grad(g_.mlm_bias, {Vp}),
                     .dy = acts_.view(a_.mlm_logits, Mr, Vp),
                     .x = acts_.view(a_.mlm_tl, Mr, C),
                     .w = linear_weight(word_c_, Vp, C),
                     .scratch = acts_.work(a_.dlogits_lp)},
                    OpRole::LmHead);  // dlogits converted once to the head's operands
    be.zero(db);
    const View tg =
        a_.mlm_tg32 != ActivationPlan::kNone ? acts_.view(a_.mlm_tg32, Mr, C) : acts_.view(a_.mlm_tg, Mr, C);
    layernorm_backward(db, da, tg, w_.mlm_ln_w, g_.mlm_ln_w, g_.mlm_ln_b, a_.mlm_mean, a_.mlm_rstd);
    // d(t) through GELU: in place in db (fp32), or into dfch in the GEMMs' operand dtype.
    linear_backward({.dx = da,
                     .dw = linear_grad(g_.mlm_w, C, C),
                     .db = grad(g_.mlm_b, {C}),
                     .dy = db,
                     .x = acts_.view(a_.mlm_in, Mr, C),
                     .w = linear_weight(mlm_c_, C, C),
                     .epilogue = Epilogue::BiasGeluErf,
                     .pre = acts_.view(a_.mlm_t, Mr, C),
                     .scratch = a_.dfch_gelu == a_.dfch ? db : acts_.work(a_.dfch)});
    be.scatter_add_rows(dh, da, View::ints(ids_.mlm_pos.data(), M));  // masked positions are distinct
  }

  // NSP and pooler, backwards: nsp = seq_relationship(pooled); pooled = tanh(dense(h[b, 0])).
  if (batch.nsp_labels) {
    const View dpooled = acts_.view(a_.dpooled, B, C), dcls = acts_.view(a_.dcls_in, B, C);
    const View pooled = acts_.view(a_.pooled, B, C);
    linear_backward({.dx = dpooled,
                     .dw = linear_grad(g_.nsp_w, K, C),
                     .db = grad(g_.nsp_b, {K}),
                     .dy = acts_.view(a_.nsp_logits, B, K),
                     .x = pooled,
                     .w = linear_weight(nsp_c_, K, C)});
    linear_backward({.dx = dcls,
                     .dw = linear_grad(g_.pool_w, C, C),
                     .db = grad(g_.pool_b, {C}),
                     .dy = dpooled,
                     .x = acts_.view(a_.cls_in, B, C),
                     .w = linear_weight(pool_c_, C, C),
                     .epilogue = Epilogue::BiasTanh,
                     .pre = pooled,
                     .scratch = a_.dfch_gelu == a_.dfch ? dpooled : acts_.work(a_.dfch)});
    be.scatter_add_rows(dh, dcls, View::ints(ids_.cls_rows.data(), B));
  }

  // The heads are final (the decoder's weight is the word table's, handed with the embeddings).
  if (config_.pooled()) wgrads_.ready(be, grads_, table_.range("bert.pooler."));
  wgrads_.ready(be, grads_, table_.range(config_.num_labels > 0 ? "classifier." : "cls."));

  // Backward through a post-LN residual block's LayerNorm: dres (=) the gradient of the sum it
  // normalised, which also flows on unchanged along the residual path (dh (=) dres).
  auto residual_layernorm_backward = [&](ActivationPlan::Handle sum, const float* dgamma, const float* dbeta,
                                         const float* gamma, ActivationPlan::Handle mean,
                                         ActivationPlan::Handle rstd) {
    be.zero(dres);
    layernorm_backward(dres, dh, acts_.view(sum, N, C), gamma, dgamma, dbeta, mean, rstd);
    be.cast(dh, dres);
  };
  const View dfch_gelu = acts_.view(a_.dfch_gelu, N, I), datty = acts_.view(a_.datty, N, C);
  const View dqkv = acts_.view(a_.dqkv, N, 3 * C);
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const BertLayerTensors& w = w_.layers[l];
    const BertLayerTensors& g = g_.layers[l];
    const LayerWeights& wc = wc_[l];
    const LayerActs& la = a_.layers[l];
    const View h_in = l == 0 ? acts_.view(a_.emb_ln, N, C) : acts_.view(a_.layers[l - 1].ln2, N, C);

    refill_mlp(l, N);

    // ln2 = LN(res2), res2 = ln1 + fcout(gelu(fc(ln1)))
    residual_layernorm_backward(la.res2, g.ln2_w, g.ln2_b, w.ln2_w, la.ln2_mean, la.ln2_rstd);
    linear_backward({.dx = dfch_gelu,
                     .dw = linear_grad(g.fcout_w, C, I),
                     .db = grad(g.fcout_b, {C}),
                     .dy = dres,
                     .x = acts_.view(la.fch_gelu, N, I),
                     .w = linear_weight(wc.fcout, C, I),
                     .scratch = acts_.work(a_.dout_lp)});
    linear_backward({.dx = dh,
                     .dw = linear_grad(g.fc_w, I, C),
                     .db = grad(g.fc_b, {I}),
                     .dy = dfch_gelu,
                     .x = acts_.view(la.ln1, N, C),
                     .w = linear_weight(wc.fc, I, C),
                     .epilogue = Epilogue::BiasGeluErf,
                     .pre = acts_.view(la.fch, N, I),
                     .dx_accumulate = true,
                     .scratch = acts_.work(a_.dfch)});

    // ln1 = LN(res1), res1 = h_in + attout(attention(qkv(h_in)))
    residual_layernorm_backward(la.res1, g.ln1_w, g.ln1_b, w.ln1_w, la.ln1_mean, la.ln1_rstd);
    linear_backward({.dx = datty,
                     .dw = linear_grad(g.attout_w, C, C),
                     .db = grad(g.attout_b, {C}),
                     .dy = dres,
                     .x = acts_.view(la.atty, N, C),
                     .w = linear_weight(wc.attout, C, C),
                     .scratch = acts_.work(a_.dout_lp)});
    if (config_.recompute.has(Recompute::Attention)) block_attention(l, batch, T);  // its state again
    attention_backward(dqkv, datty, acts_.view(la.atty, N, C), acts_.view(la.qkv, N, 3 * C), la.att,
                       a_.attn_scratch, seqs_, T, NH, /*causal=*/false, cu_seqlens());
    linear_backward({.dx = dh,
                     .dw = linear_grad(g.qkv_w, 3 * C, C),
                     .db = grad(g.qkv_b, {3 * C}),
                     .dy = dqkv,
                     .x = h_in,
                     .w = linear_weight(wc.qkv, 3 * C, C),
                     .dx_accumulate = true});
    wgrads_.ready(be, grads_, table_.range("bert.encoder.layer." + std::to_string(l) + "."));
  }

  // Embeddings: emb_ln = LN(word + type + pos)
  const View demb = dres;
  be.zero(demb);
  layernorm_backward(demb, dh, acts_.view(a_.emb, N, C), w_.emb_ln_w, g_.emb_ln_w, g_.emb_ln_b, a_.emb_mean,
                     a_.emb_rstd);
  be.embedding_backward({.dword = grad(g_.word, {Vp, C}),
                         .dpos = grad(g_.pos, {config_.max_position, C}),
                         .dtype = grad(g_.type, {config_.type_vocab_size, C}),
                         .dout = demb,
                         .tokens = View::ints(ids_.tokens.data(), N),
                         .types = View::ints(ids_.types.data(), N),
                         .B = seqs_,
                         .T = T,
                         .cu_seqlens = cu_seqlens(),
                         .pad_token = config_.pad_token_id});
  // The embeddings (the word table also the MLM decoder's) are final now, the last range handed.
  wgrads_.finish(be, grads_);
}

}  // namespace mptrain
