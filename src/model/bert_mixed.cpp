// BERT's mixed-precision path: the forward and backward of bert.cpp with every activation in the
// dtype the precision policy names and every GEMM on gemm_mixed (fp32 accumulation into fp32
// results and fp32 master gradients), as PyTorch autocast runs Hugging Face's BertForPreTraining.
//
// BERT is post-LN, so the residual stream is the LayerNorm outputs: each LayerNorm writes its
// fp32 output into h32 (two alternating scratch buffers: the current layer input and ln1),
// which the next residual add reads, and a copy in the GEMM's input dtype (the saved ln/emb_ln
// buffers), which the GEMMs read forward and backward (autocast casts the fp32 LayerNorm
// output for the linear; the same values). Per layer, forward:
//   qkv  = round(h·Wqkv^T + b)              GEMM → fp32 gemm_out, bias in fp32, rounded once
//   y    = masked attention(qkv)            fp32 scores and softmax, P and y stored low precision
//   res1 = h32 + round(y·Wo^T + b)           fp32;  ln1 = LN(res1) (fp32 + low-precision copy)
//   fch  = round(ln1·Wfc^T + b); g = gelu_erf(fch) (low precision)
//   res2 = ln1_32 + round(g·Wout^T + b);    ln2 = LN(res2)
// Heads: pooler tanh(round(h[CLS]·Wp^T + b)) stored low precision; NSP and MLM decoder logits
// fp32 (the fused cross-entropy reads fp32 and writes dlogits in place); the MLM transform's
// GELU output is stored low precision and widened for its fp32 LayerNorm (autocast: a bf16
// GELU output into an fp32 LayerNorm).
// Backward feeds each GEMM its upstream gradient converted once (dout_lp, dlogits_lp, dfch) and
// accumulates dW into the fp32 gradients; LayerNorm backward is the fp32 op.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/ops/attention_masked.h"
#include "backend/ops/convert.h"
#include "backend/ops/embeddings.h"
#include "backend/ops/gelu_erf.h"
#include "backend/ops/gemm_mixed.h"
#include "backend/ops/layernorm.h"
#include "backend/ops/residual.h"
#include "backend/ops/tanh.h"
#include "core/error.h"
#include "model/bert.h"

namespace mptrain {

namespace {

constexpr StorageType F32 = StorageType::F32;
constexpr int kNsp = Bert::kNspClasses;

// Row-major [R, Cc] and its transpose, as GemmLayouts (elements).
cpu::GemmLayout rows(int Cc) { return {0, 0, Cc, 1}; }
cpu::GemmLayout transposed(int Cc) { return {0, 0, 1, Cc}; }

// Element i of a buffer of dtype t.
void* elem(void* base, size_t i, StorageType t) { return static_cast<char*>(base) + i * storage_bytes(t); }

// The weights of one encoder layer as its GEMMs read them.
struct LayerWeights {
  WeightRef qkv, attout, fc, fcout;
};

// Everything both passes need, resolved once per pass.
struct BertMixedContext {
  StorageType ln_s, lin_s, y_s, gelu_s, lin_op, head_op;
  cpu::GemmMath lin, head;
  cpu::AttentionTypes at;
  std::vector<LayerWeights> layers;
  WeightRef word, pool, mlm, nsp;
};

BertMixedContext mixed_context(const Policy& P, const WeightCopies& copies,
                               const ParamTable& table, const float* params, int n_layer) {
  BertMixedContext m;
  m.ln_s = P.rule(OpKind::LayerNorm).output;
  m.lin_s = P.rule(OpKind::Linear).output;
  m.y_s = P.rule(OpKind::AttnValues).output;
  m.gelu_s = P.rule(OpKind::Gelu).output;
  m.lin = cpu::gemm_math(P.rule(OpKind::Linear).compute);
  m.head = cpu::gemm_math(P.rule(OpKind::LmHead).compute);
  m.lin_op = P.operand(OpKind::Linear);
  m.head_op = P.dlogits;
  m.at = attention_types(P);
  auto ref = [&](const std::string& name) { return copies.ref(table, name, params); };
  for (int l = 0; l < n_layer; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    // query | key | value are consecutive in the table, so their copies are one [3C, C] operand.
    m.layers.push_back({ref(p + "attention.self.query.weight"), ref(p + "attention.output.dense.weight"),
                        ref(p + "intermediate.dense.weight"), ref(p + "output.dense.weight")});
  }
  m.word = ref("bert.embeddings.word_embeddings.weight");
  m.pool = ref("bert.pooler.dense.weight");
  m.mlm = ref("cls.predictions.transform.dense.weight");
  m.nsp = ref("cls.seq_relationship.weight");
  return m;
}

}  // namespace

void Bert::forward_mixed(const BertInputs& batch, const int* types, int B, int T) {
  const int N = B * T, C = config_.hidden, I = config_.intermediate, NH = config_.n_head;
  const int Vp = config_.padded_vocab_size;
  const float eps = config_.ln_eps;
  const size_t NC = static_cast<size_t>(N) * C;
  const BertMixedContext m = mixed_context(policy_, copies_, table_, params_.data(), config_.n_layer);
  float* acc = acts_.get(a_.gemm_out);
  // acc[R,OC] (fp32) = x[R,Cin]·W[OC,Cin]^T in arithmetic `math` (nn.Linear's layout).
  auto gemm = [&](float* dst, const void* x, StorageType tx, const WeightRef& w, int R, int Cin, int OC,
                  cpu::GemmMath math) {
    cpu::gemm_mixed(dst, F32, rows(OC), {x, tx, rows(Cin)}, {w.ptr, w.type, transposed(Cin), true}, math, 1, 1, R,
                    OC, Cin, false, *ws_, ctx_);
  };
  // A LayerNorm of the residual stream: fp32 output h (read by the next residual add and the
  // heads) and its copy in the GEMM input dtype (saved for the GEMMs' backward).
  auto layernorm = [&](float* h, void* h_lp, float* mean, float* rstd, const float* x, const float* w,
                       const float* b) {
    cpu::layernorm_forward(h, mean, rstd, x, w, b, N, C, eps);
    cpu::convert(h_lp, m.ln_s, h, F32, NC);
  };

  float* h32[2] = {acts_.get(a_.h32), acts_.get(a_.h32) + NC};
  cpu::embeddings_forward(acts_.get(a_.emb), batch.tokens, types, w_.word, w_.pos, w_.type, B, T, C);
  layernorm(h32[0], acts_.raw(a_.emb_ln), acts_.get(a_.emb_mean), acts_.get(a_.emb_rstd), acts_.get(a_.emb),
            w_.emb_ln_w, w_.emb_ln_b);
  const void* h_lp = acts_.raw(a_.emb_ln);
  for (int l = 0; l < config_.n_layer; ++l) {
    const BertLayerTensors& w = w_.layers[l];
    const LayerWeights& wc = m.layers[l];
    LayerActs& la = a_.layers[l];
    void* qkv = acts_.raw(la.qkv);
    void* atty = acts_.raw(la.atty);
    float* res1 = acts_.get(la.res1);
    void* fch = acts_.raw(la.fch);
    void* fch_gelu = acts_.raw(la.fch_gelu);
    float* res2 = acts_.get(la.res2);
    // ln1 = LayerNorm(h + dense(attention(qkv(h))))
    gemm(acc, h_lp, m.ln_s, wc.qkv, N, C, 3 * C, m.lin);
    cpu::bias_forward_typed(qkv, m.lin_s, acc, w.qkv_b, N, 3 * C);
    cpu::attention_masked_forward_typed(atty, acts_.raw(la.att), qkv, batch.attention_mask,
                                        acts_.raw(a_.attn_scratch), m.at, B, T, C, NH, *ws_, ctx_);
    gemm(acc, atty, m.y_s, wc.attout, N, C, C, m.lin);
    cpu::residual_bias_forward(res1, h32[0], acc, w.attout_b, m.lin_s, N, C);
    layernorm(h32[1], acts_.raw(la.ln1), acts_.get(la.ln1_mean), acts_.get(la.ln1_rstd), res1, w.ln1_w, w.ln1_b);
    // ln2 = LayerNorm(ln1 + dense(gelu(dense(ln1))))
    gemm(acc, acts_.raw(la.ln1), m.ln_s, wc.fc, N, C, I, m.lin);
    cpu::bias_forward_typed(fch, m.lin_s, acc, w.fc_b, N, I);
    cpu::gelu_erf_forward_typed(fch_gelu, m.gelu_s, fch, m.lin_s, static_cast<size_t>(N) * I);
    gemm(acc, fch_gelu, m.gelu_s, wc.fcout, N, I, C, m.lin);
    cpu::residual_bias_forward(res2, h32[1], acc, w.fcout_b, m.lin_s, N, C);
    layernorm(h32[0], acts_.raw(la.ln2), acts_.get(la.ln2_mean), acts_.get(la.ln2_rstd), res2, w.ln2_w, w.ln2_b);
    h_lp = acts_.raw(la.ln2);
  }
  const float* h = h32[0];  // the encoder's output, fp32

  // Pooler and NSP: tanh(dense(h[b, 0])) → seq_relationship (fp32 logits).
  void* cls_in = acts_.raw(a_.cls_in);
  void* pooled = acts_.raw(a_.pooled);
  for (int b = 0; b < B; ++b)
    cpu::convert(elem(cls_in, static_cast<size_t>(b) * C, m.ln_s), m.ln_s, h + static_cast<size_t>(b) * T * C, F32,
                 C);
  gemm(acc, cls_in, m.ln_s, m.pool, B, C, C, m.lin);
  cpu::bias_forward_typed(pooled, m.lin_s, acc, w_.pool_b, B, C);
  cpu::tanh_forward_typed(pooled, m.lin_s, pooled, m.lin_s, static_cast<size_t>(B) * C);
  float* nsp_logits = acts_.get(a_.nsp_logits);
  gemm(nsp_logits, pooled, m.lin_s, m.nsp, B, C, kNsp, m.lin);
  cpu::bias_forward_typed(nsp_logits, F32, nsp_logits, w_.nsp_b, B, kNsp);

  // MLM head on the masked rows only (mlm_rows_ of them, zero rows after the masked ones).
  const int M = static_cast<int>(mlm_pos_.size());
  if (M == 0) return;
  const int Mr = mlm_rows_;
  const size_t MC = static_cast<size_t>(Mr) * C;
  void* mlm_in = acts_.raw(a_.mlm_in);
  for (int r = 0; r < M; ++r)
    cpu::convert(elem(mlm_in, static_cast<size_t>(r) * C, m.ln_s), m.ln_s, h + static_cast<size_t>(mlm_pos_[r]) * C,
                 F32, C);
  std::memset(elem(mlm_in, static_cast<size_t>(M) * C, m.ln_s), 0, static_cast<size_t>(Mr - M) * C *
                                                                      storage_bytes(m.ln_s));
  float* tg32 = acts_.get(a_.mlm_tg32);
  gemm(acc, mlm_in, m.ln_s, m.mlm, Mr, C, C, m.lin);
  cpu::bias_forward_typed(acts_.raw(a_.mlm_t), m.lin_s, acc, w_.mlm_b, Mr, C);
  cpu::gelu_erf_forward_typed(acts_.raw(a_.mlm_tg), m.gelu_s, acts_.raw(a_.mlm_t), m.lin_s, MC);
  cpu::convert(tg32, F32, acts_.raw(a_.mlm_tg), m.gelu_s, MC);
  cpu::layernorm_forward_typed(acts_.raw(a_.mlm_tl), m.ln_s, acts_.get(a_.mlm_mean), acts_.get(a_.mlm_rstd), tg32,
                               w_.mlm_ln_w, w_.mlm_ln_b, Mr, C, eps);
  // logits[Mr,Vp] (fp32) = tl·word^T + bias, in the LM head's arithmetic.
  float* logits = acts_.get(a_.mlm_logits);
  gemm(logits, acts_.raw(a_.mlm_tl), m.ln_s, m.word, Mr, C, Vp, m.head);
  cpu::bias_forward_typed(logits, F32, logits, w_.mlm_bias, Mr, Vp);
}

void Bert::backward_mixed(const BertInputs& batch, const int* types, int B, int T) {
  const int N = B * T, C = config_.hidden, I = config_.intermediate, NH = config_.n_head;
  const int Vp = config_.padded_vocab_size;
  const size_t NC = static_cast<size_t>(N) * C;
  const int M = static_cast<int>(mlm_pos_.size());
  const BertMixedContext m = mixed_context(policy_, copies_, table_, params_.data(), config_.n_layer);
  float* dh = acts_.get(a_.dh);      // gradient of the current layer's output, then of its input
  float* dres = acts_.get(a_.dres);  // gradient of a residual sum (before a LayerNorm)
  std::fill(dh, dh + NC, 0.0f);

  // A linear layer's backward (weight W[OC,Cin]) given its upstream gradient dy[R,OC] as a
  // GEMM operand (dy_ready: already in the arithmetic's format):
  //   dx[R,Cin] (= or +=, fp32 when accumulating) = dy·W ;  dW[OC,Cin] += dy^T·x
  // The bias gradient is summed separately, from the fp32 dy where there is one.
  auto linear_backward = [&](void* dx, StorageType tdx, bool dx_accumulate, float* dW, const void* dy,
                             StorageType tdy, bool dy_ready, const void* x, StorageType tx, const WeightRef& w,
                             int R, int Cin, int OC, cpu::GemmMath math) {
    cpu::gemm_mixed(dx, tdx, rows(Cin), {dy, tdy, rows(OC), dy_ready}, {w.ptr, w.type, rows(Cin), true}, math, 1,
                      1, R, Cin, OC, dx_accumulate, *ws_, ctx_);
    cpu::gemm_mixed(dW, F32, rows(Cin), {dy, tdy, transposed(OC), dy_ready}, {x, tx, rows(Cin)}, math, 1, 1, OC, Cin,
                    R, true, *ws_, ctx_);
  };
  void* dlp = acts_.raw(a_.dfch);  // GELU's / tanh's input gradient as a GEMM operand

  // MLM head, backwards: logits = tl·word^T + bias; tl = LN(tg); tg = gelu(t); t = dense(mlm_in).
  if (M > 0) {
    const int Mr = mlm_rows_;  // M real rows, then zero rows with zero gradients
    const size_t MC = static_cast<size_t>(Mr) * C;
    float* da = acts_.get(a_.dmlm_a);
    float* db = acts_.get(a_.dmlm_b);
    void* dlogits = acts_.raw(a_.dlogits_lp);
    cpu::to_gemm_operand(dlogits, acts_.get(a_.mlm_logits), F32, static_cast<size_t>(Mr) * Vp, m.head, *ws_);
    linear_backward(da, F32, false, g_.word, dlogits, m.head_op, true, acts_.raw(a_.mlm_tl), m.ln_s, m.word, Mr, C,
                    Vp, m.head);
    cpu::bias_backward_typed(g_.mlm_bias, acts_.get(a_.mlm_logits), F32, Mr, Vp);
    std::fill(db, db + MC, 0.0f);
    cpu::layernorm_backward(db, g_.mlm_ln_w, g_.mlm_ln_b, da, acts_.get(a_.mlm_tg32), w_.mlm_ln_w,
                            acts_.get(a_.mlm_mean), acts_.get(a_.mlm_rstd), Mr, C);
    cpu::gelu_erf_backward_typed(dlp, m.lin_op, acts_.raw(a_.mlm_t), m.lin_s, db, MC);
    linear_backward(da, F32, false, g_.mlm_w, dlp, m.lin_op, false, acts_.raw(a_.mlm_in), m.ln_s, m.mlm, Mr, C, C,
                    m.lin);
    cpu::bias_backward_typed(g_.mlm_b, dlp, m.lin_op, Mr, C);
    for (int r = 0; r < M; ++r) {  // positions are distinct: a plain scatter
      float* dst = dh + static_cast<size_t>(mlm_pos_[r]) * C;
      const float* src = da + static_cast<size_t>(r) * C;
      for (int c = 0; c < C; ++c) dst[c] += src[c];
    }
  }

  // NSP and pooler, backwards: nsp = seq_relationship(pooled); pooled = tanh(dense(h[b, 0])).
  if (batch.nsp_labels) {
    const size_t BC = static_cast<size_t>(B) * C;
    float* dpooled = acts_.get(a_.dpooled);
    float* dcls = acts_.get(a_.dcls_in);
    // dlogits are fp32 (the fused loss wrote them in place): gemm_mixed converts them.
    linear_backward(dpooled, F32, false, g_.nsp_w, acts_.get(a_.nsp_logits), F32, false, acts_.raw(a_.pooled),
                    m.lin_s, m.nsp, B, C, kNsp, m.lin);
    cpu::bias_backward_typed(g_.nsp_b, acts_.get(a_.nsp_logits), F32, B, kNsp);
    cpu::tanh_backward_typed(dlp, m.lin_op, acts_.raw(a_.pooled), m.lin_s, dpooled, BC);
    linear_backward(dcls, F32, false, g_.pool_w, dlp, m.lin_op, false, acts_.raw(a_.cls_in), m.ln_s, m.pool, B, C,
                    C, m.lin);
    cpu::bias_backward_typed(g_.pool_b, dlp, m.lin_op, B, C);
    for (int b = 0; b < B; ++b) {
      float* dst = dh + static_cast<size_t>(b) * T * C;
      const float* src = dcls + static_cast<size_t>(b) * C;
      for (int c = 0; c < C; ++c) dst[c] += src[c];
    }
  }

  void* dout_lp = acts_.raw(a_.dout_lp);
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const BertLayerTensors& w = w_.layers[l];
    const BertLayerTensors& g = g_.layers[l];
    const LayerWeights& wc = m.layers[l];
    LayerActs& la = a_.layers[l];
    const void* h_in = l == 0 ? acts_.raw(a_.emb_ln) : acts_.raw(a_.layers[l - 1].ln2);
    float* dfch_gelu = acts_.get(a_.dfch_gelu);
    void* dqkv = acts_.raw(a_.dqkv);
    void* datty = acts_.raw(a_.datty);

    // ln2 = LN(res2), res2 = ln1 + fcout(gelu(fc(ln1)))
    std::fill(dres, dres + NC, 0.0f);
    cpu::layernorm_backward(dres, g.ln2_w, g.ln2_b, dh, acts_.get(la.res2), w.ln2_w, acts_.get(la.ln2_mean),
                            acts_.get(la.ln2_rstd), N, C);
    std::memcpy(dh, dres, sizeof(float) * NC);  // the residual path into ln1
    cpu::to_gemm_operand(dout_lp, dres, F32, NC, m.lin, *ws_);
    linear_backward(dfch_gelu, F32, false, g.fcout_w, dout_lp, m.lin_op, true, acts_.raw(la.fch_gelu), m.gelu_s,
                    wc.fcout, N, I, C, m.lin);
    cpu::bias_backward_typed(g.fcout_b, dres, F32, N, C);
    // dfch is written in the operand storage but not rounded to TF32 / fp16 when those are
    // emulated in fp32 (not `ready`): gemm_mixed rounds it.
    cpu::gelu_erf_backward_typed(dlp, m.lin_op, acts_.raw(la.fch), m.lin_s, dfch_gelu, static_cast<size_t>(N) * I);
    linear_backward(dh, F32, true, g.fc_w, dlp, m.lin_op, false, acts_.raw(la.ln1), m.ln_s, wc.fc, N, C, I, m.lin);
    cpu::bias_backward_typed(g.fc_b, dlp, m.lin_op, N, I);

    // ln1 = LN(res1), res1 = h_in + attout(attention(qkv(h_in)))
    std::fill(dres, dres + NC, 0.0f);
    cpu::layernorm_backward(dres, g.ln1_w, g.ln1_b, dh, acts_.get(la.res1), w.ln1_w, acts_.get(la.ln1_mean),
                            acts_.get(la.ln1_rstd), N, C);
    std::memcpy(dh, dres, sizeof(float) * NC);  // the residual path into h_in
    cpu::to_gemm_operand(dout_lp, dres, F32, NC, m.lin, *ws_);
    linear_backward(datty, m.y_s, false, g.attout_w, dout_lp, m.lin_op, true, acts_.raw(la.atty), m.y_s, wc.attout,
                    N, C, C, m.lin);
    cpu::bias_backward_typed(g.attout_b, dres, F32, N, C);
    cpu::attention_masked_backward_typed(dqkv, datty, acts_.raw(la.qkv), acts_.raw(la.att),
                                         acts_.raw(a_.attn_scratch), m.at, B, T, C, NH, *ws_, ctx_);
    linear_backward(dh, F32, true, g.qkv_w, dqkv, m.lin_s, false, h_in, m.ln_s, wc.qkv, N, C, 3 * C, m.lin);
    cpu::bias_backward_typed(g.qkv_b, dqkv, m.lin_s, N, 3 * C);
  }

  // Embeddings: emb_ln = LN(word + type + pos)
  float* demb = dres;
  std::fill(demb, demb + NC, 0.0f);
  cpu::layernorm_backward(demb, g_.emb_ln_w, g_.emb_ln_b, dh, acts_.get(a_.emb), w_.emb_ln_w, acts_.get(a_.emb_mean),
                          acts_.get(a_.emb_rstd), N, C);
  cpu::embeddings_backward(g_.word, g_.pos, g_.type, demb, batch.tokens, types, config_.pad_token_id, B, T, C);
}

}  // namespace mptrain
