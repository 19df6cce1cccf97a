// BertDevice's forward, losses and backward (bert_device.h): model/bert.cpp's forward_impl,
// loss_impl and backward_impl written out with the CUDA launchers, templated on the one storage
// type T of the precision. The batch is already on the device (bert_device.cpp uploads it).
#include <type_traits>
#include <utility>

#include "backend/cuda/attention.h"
#include "backend/cuda/bert_device_impl.h"
#include "backend/cuda/crossentropy.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/dispatch.h"
#include "backend/cuda/embeddings.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/gelu_erf.h"
#include "backend/cuda/layernorm.h"
#include "backend/cuda/linear.h"
#include "backend/cuda/rows.h"
#include "backend/cuda/tanh.h"
#include "backend/cuda/widen_grads.h"
#include "model/bert.h"

namespace mptrain::cuda {

using bert_device_detail::LayerSlots;
using bert_device_detail::StepShape;

namespace {
constexpr int kNsp = Bert::kNspClasses;

// The parameters (or gradients) the passes read and write: fp32 for T = float, else the
// 16-bit copy (gradients: the 16-bit buffer, cast to fp32 range by range in grads_ready).
template <class T>
BertTensorsOf<T> bind(const ParamTable& table, const DeviceMemory& f32, const DeviceMemory& lowp,
                      int n_layer) {
  T* base = static_cast<T*>(std::is_same_v<T, float> ? f32.get() : lowp.get());
  return bind_bert_tensors<T>(table, base, n_layer);
}
}  // namespace

// Per layer: ln1 = LN(h + dense(attention(qkv(h)))), ln2 = LN(ln1 + dense(gelu(dense(ln1)))),
// each residual add fused with its LayerNorm (residual_layernorm_forward, bit-identical to the
// pair). Then the pooler/NSP head on the [CLS] rows and the MLM head on the masked rows.
template <class T>
void BertDevice::Impl::forward(const StepShape& s) {
  const int B = s.B, Tn = s.Tn, N = s.N, C = config.hidden, I = config.intermediate, NH = config.n_head;
  const float eps = config.ln_eps;
  const BertTensorsOf<T> w = bind<T>(table, params, params_lp, config.n_layer);
  const int* mask = s.masked ? in<int>(batch.mask) : nullptr;
  T* proj = at<T>(plan.proj);

  embeddings_forward<T>(at<T>(plan.emb), in<int>(batch.tokens), in<int>(batch.types), w.word, w.pos, w.type,
                        B, Tn, C, ctx);
  layernorm_forward<T>(at<T>(plan.emb_ln), at<float>(plan.emb_mean), at<float>(plan.emb_rstd),
                       at<T>(plan.emb), w.emb_ln_w, w.emb_ln_b, N, C, eps, ctx);
  const T* h = at<T>(plan.emb_ln);
  for (int l = 0; l < config.n_layer; ++l) {
    const BertLayerTensorsOf<T>& wl = w.layers[l];
    const LayerSlots& a = plan.layers[l];
    T* qkv = at<T>(a.qkv);
    T* atty = at<T>(a.atty);
    linear_forward<T>(qkv, h, wl.qkv_w, wl.qkv_b, N, C, 3 * C, math, ctx);
    if (flash)
      flash_attention_masked_forward<T>(atty, at<float>(a.att), qkv, mask, B, Tn, C, NH, ctx);
    else
      attention_masked_forward<T>(atty, at<char>(a.att), qkv, mask, at<char>(plan.attn_scratch), B, Tn, C, NH,
                                  math, ctx);
    linear_forward<T>(proj, atty, wl.attout_w, wl.attout_b, N, C, C, math, ctx);
    residual_layernorm_forward<T>(at<T>(a.res1), at<T>(a.ln1), at<float>(a.ln1_mean), at<float>(a.ln1_rstd),
                                  h, proj, wl.ln1_w, wl.ln1_b, N, C, eps, ctx);
    linear_forward<T>(at<T>(a.fch), at<T>(a.ln1), wl.fc_w, wl.fc_b, N, C, I, math, ctx);
    gelu_erf_forward<T>(at<T>(a.fch_gelu), at<T>(a.fch), static_cast<size_t>(N) * I, ctx);
    linear_forward<T>(proj, at<T>(a.fch_gelu), wl.fcout_w, wl.fcout_b, N, I, C, math, ctx);
    residual_layernorm_forward<T>(at<T>(a.res2), at<T>(a.ln2), at<float>(a.ln2_mean), at<float>(a.ln2_rstd),
                                  at<T>(a.ln1), proj, wl.ln2_w, wl.ln2_b, N, C, eps, ctx);
    h = at<T>(a.ln2);
  }

  // Pooler and NSP: tanh(dense(h[b, 0])) → seq_relationship (computed with or without labels,
  // as on the CPU).
  gather_rows<T>(at<T>(plan.cls_in), h, in<int>(batch.cls_pos), B, B, C, ctx);
  linear_forward<T>(at<T>(plan.pooled), at<T>(plan.cls_in), w.pool_w, w.pool_b, B, C, C, math, ctx);
  tanh_forward<T>(at<T>(plan.pooled), at<T>(plan.pooled), static_cast<size_t>(B) * C, ctx);
  linear_forward<T>(at<T>(plan.nsp_logits), at<T>(plan.pooled), w.nsp_w, w.nsp_b, B, C, kNsp, math, ctx);

  // MLM head on the Mr rows (the M masked ones, then zero rows): dense → GELU → LayerNorm →
  // decoder (word embeddings^T + bias).
  if (s.M == 0) return;
  const int Mr = s.Mr;
  gather_rows<T>(at<T>(plan.mlm_in), h, in<int>(batch.mlm_pos), s.M, Mr, C, ctx);
  linear_forward<T>(at<T>(plan.mlm_t), at<T>(plan.mlm_in), w.mlm_w, w.mlm_b, Mr, C, C, math, ctx);
  gelu_erf_forward<T>(at<T>(plan.mlm_tg), at<T>(plan.mlm_t), static_cast<size_t>(Mr) * C, ctx);
  layernorm_forward<T>(at<T>(plan.mlm_tl), at<float>(plan.mlm_mean), at<float>(plan.mlm_rstd),
                       at<T>(plan.mlm_tg), w.mlm_ln_w, w.mlm_ln_b, Mr, C, eps, ctx);
  linear_forward<T>(at<T>(plan.mlm_logits), at<T>(plan.mlm_tl), w.word, w.mlm_bias, Mr, C,
                    config.padded_vocab_size, math, ctx);
}

// Arg-maxes first (the fused pass overwrites the logits with their gradient), then the fused
// cross-entropies: MLM over the Mr rows (padding rows have target -1: loss 0, gradient 0), NSP
// as a 2-class cross-entropy (V = Vp = 2: the kernel's scalar path). dlogits only when the step
// has a backward. Sophia's pass draws the labels inside the same fused kernels, over the M
// masked rows only (the CPU's row indices, so its uniforms), then zeroes the padding rows'
// gradient.
template <class T>
void BertDevice::Impl::losses(const StepShape& s) {
  const int V = config.vocab_size, Vp = config.padded_vocab_size;
  if (s.M > 0) {
    T* logits = at<T>(plan.mlm_logits);
    row_argmax<T>(out<int>(stats.mlm_best), logits, s.M, V, Vp, ctx);
    if (s.sampled) {
      crossentropy_sampled_forward_backward<T>(
          out<float>(stats.mlm_losses), logits, out<int>(stats.mlm_sampled), logits,
          in<float>(batch.mlm_dloss), s.M, V, Vp, s.seed, s.counter, ctx);
      fill_bytes(logits + static_cast<size_t>(s.M) * Vp, 0, static_cast<size_t>(s.Mr - s.M) * Vp * sizeof(T),
                 ctx);
    } else {
      crossentropy_forward_backward<T>(out<float>(stats.mlm_losses), s.backward ? logits : nullptr, logits,
                                       in<int>(batch.mlm_targets), in<float>(batch.mlm_dloss), s.Mr, V, Vp,
                                       ctx);
    }
  }
  if (s.nsp) {
    T* logits = at<T>(plan.nsp_logits);
    row_argmax<T>(out<int>(stats.nsp_best), logits, s.B, kNsp, kNsp, ctx);
    if (s.sampled)
      crossentropy_sampled_forward_backward<T>(
          out<float>(stats.nsp_losses), logits, out<int>(stats.nsp_sampled), logits,
          in<float>(batch.nsp_dloss), s.B, kNsp, kNsp, s.seed ^ Bert::kNspSeedSalt, s.counter, ctx);
    else
      crossentropy_forward_backward<T>(out<float>(stats.nsp_losses), s.backward ? logits : nullptr, logits,
                                       in<int>(batch.nsp_labels), in<float>(batch.nsp_dloss), s.B, kNsp, kNsp,
                                       ctx);
  }
}

// 16-bit: the range's gradients to the fp32 buffer (the host's rounding; accumulating, through
// the fp32 scratch, then added), then the hook.
template <class T>
void BertDevice::Impl::grads_ready(std::pair<size_t, size_t> r, bool accumulate) {
  if constexpr (!std::is_same_v<T, float>)
    widen_grad_range<T>(static_cast<float*>(grads.get()), static_cast<float*>(grads_acc.get()),
                        static_cast<const T*>(grads_lp.get()), r.first, r.second, accumulate, ctx);
  if (grad_ready) grad_ready(r.first, r.second);
}

// model/bert.cpp's backward_impl, announcing each range of the gradient table as soon as its
// last write is enqueued (grads_ready, bert_device.h's order): the heads after the MLM and NSP
// heads, each layer after its own backward, the embeddings (the tied word embeddings
// included: the MLM decoder wrote them first) after the embedding backward.
// Two [N,C] gradient buffers: `cur` holds the gradient of the current layer's output and, at
// the end of the layer, of its input; `nxt` the gradient of a residual sum (a LayerNorm's
// input), which is also the residual branch's upstream gradient, so the CPU's copy of it is not
// needed: the branch's input gradient is added to it in place.
template <class T>
void BertDevice::Impl::backward(const StepShape& s, bool accumulate) {
  const int B = s.B, Tn = s.Tn, N = s.N, C = config.hidden, I = config.intermediate, NH = config.n_head;
  const int Vp = config.padded_vocab_size;
  const size_t NC = static_cast<size_t>(N) * C;
  constexpr bool is_float = std::is_same_v<T, float>;
  const BertTensorsOf<T> w = bind<T>(table, params, params_lp, config.n_layer);
  const BertTensorsOf<T> g = bind<T>(table, grads, grads_lp, config.n_layer);
  const int* mask = s.masked ? in<int>(batch.mask) : nullptr;
  const T* ones = at<T>(plan.ones);
  float* ln_scr = at<float>(plan.ln_scratch);
  T* cur = at<T>(plan.dh);
  T* nxt = at<T>(plan.dres);
  auto zero = [&](T* p, size_t count) { fill_bytes(p, 0, count * sizeof(T), ctx); };

  // Every gradient is +=: start from zero (fp32 accumulating: from the micro-batches before;
  // 16-bit gradients are added to the fp32 buffer range by range, through the fp32 scratch,
  // allocated here before any range is announced: no allocation under a running reduction).
  T* gbase = static_cast<T*>(is_float ? grads.get() : grads_lp.get());
  if (!is_float && accumulate && !grads_acc.get()) grads_acc = DeviceMemory(n * sizeof(float));
  if (!(accumulate && is_float)) zero(gbase, n);
  zero(cur, NC);

  // MLM head: logits = tl·word^T + bias; tl = LN(tg); tg = gelu(t); t = dense(mlm_in).
  if (s.M > 0) {
    const int Mr = s.Mr;
    const size_t MC = static_cast<size_t>(Mr) * C;
    T* da = at<T>(plan.dmlm_a);
    T* db = at<T>(plan.dmlm_b);
    zero(da, MC);
    linear_backward<T>(da, g.word, g.mlm_bias, at<T>(plan.mlm_logits), at<T>(plan.mlm_tl), w.word, ones, Mr,
                       C, Vp, math, ctx);
    zero(db, MC);
    layernorm_backward<T>(db, g.mlm_ln_w, g.mlm_ln_b, da, at<T>(plan.mlm_tg), w.mlm_ln_w,
                          at<float>(plan.mlm_mean), at<float>(plan.mlm_rstd), ln_scr, Mr, C, ctx);
    gelu_erf_backward<T>(db, at<T>(plan.mlm_t), db, MC, ctx);
    zero(da, MC);
    linear_backward<T>(da, g.mlm_w, g.mlm_b, db, at<T>(plan.mlm_in), w.mlm_w, ones, Mr, C, C, math, ctx);
    scatter_add_rows<T>(cur, da, in<int>(batch.mlm_pos), s.M, C, ctx);  // positions are distinct
  }

  // NSP and pooler: nsp = seq_relationship(pooled); pooled = tanh(dense(h[b, 0])). A second
  // scatter: a [CLS] row may also be a masked one.
  if (s.nsp) {
    const size_t BC = static_cast<size_t>(B) * C;
    T* dpooled = at<T>(plan.dpooled);
    T* dcls = at<T>(plan.dcls);
    zero(dpooled, BC);
    linear_backward<T>(dpooled, g.nsp_w, g.nsp_b, at<T>(plan.nsp_logits), at<T>(plan.pooled), w.nsp_w, ones,
                       B, C, kNsp, math, ctx);
    tanh_backward<T>(dpooled, at<T>(plan.pooled), dpooled, BC, ctx);
    zero(dcls, BC);
    linear_backward<T>(dcls, g.pool_w, g.pool_b, dpooled, at<T>(plan.cls_in), w.pool_w, ones, B, C, C, math,
                       ctx);
    scatter_add_rows<T>(cur, dcls, in<int>(batch.cls_pos), B, C, ctx);
  }
  grads_ready<T>(head_range, accumulate);  // pooler, MLM transform and bias, NSP: done

  for (int l = config.n_layer - 1; l >= 0; --l) {
    const BertLayerTensorsOf<T>& wl = w.layers[l];
    const BertLayerTensorsOf<T>& gl = g.layers[l];
    const LayerSlots& a = plan.layers[l];
    const T* h_in = l == 0 ? at<T>(plan.emb_ln) : at<T>(plan.layers[l - 1].ln2);
    T* dfch = at<T>(plan.dfch);
    T* dqkv = at<T>(plan.dqkv);
    T* datty = at<T>(plan.datty);
    // ln2 = LN(res2), res2 = ln1 + fcout(gelu(fc(ln1))):  nxt = d res2, then += the branch's d ln1.
    zero(nxt, NC);
    layernorm_backward<T>(nxt, gl.ln2_w, gl.ln2_b, cur, at<T>(a.res2), wl.ln2_w, at<float>(a.ln2_mean),
                          at<float>(a.ln2_rstd), ln_scr, N, C, ctx);
    zero(dfch, static_cast<size_t>(N) * I);
    linear_backward<T>(dfch, gl.fcout_w, gl.fcout_b, nxt, at<T>(a.fch_gelu), wl.fcout_w, ones, N, I, C, math,
                       ctx);
    gelu_erf_backward<T>(dfch, at<T>(a.fch), dfch, static_cast<size_t>(N) * I, ctx);
    linear_backward<T>(nxt, gl.fc_w, gl.fc_b, dfch, at<T>(a.ln1), wl.fc_w, ones, N, C, I, math, ctx);
    // ln1 = LN(res1), res1 = h_in + attout(attention(qkv(h_in))):  cur = d res1, then += d h_in.
    zero(cur, NC);
    layernorm_backward<T>(cur, gl.ln1_w, gl.ln1_b, nxt, at<T>(a.res1), wl.ln1_w, at<float>(a.ln1_mean),
                          at<float>(a.ln1_rstd), ln_scr, N, C, ctx);
    zero(datty, NC);
    linear_backward<T>(datty, gl.attout_w, gl.attout_b, cur, at<T>(a.atty), wl.attout_w, ones, N, C, C, math,
                       ctx);
    if (flash)
      flash_attention_masked_backward<T>(dqkv, datty, at<T>(a.qkv), at<T>(a.atty), at<float>(a.att), mask,
                                         at<char>(plan.attn_scratch), B, Tn, C, NH, ctx);
    else
      attention_masked_backward<T>(dqkv, datty, at<T>(a.qkv), at<char>(a.att), at<char>(plan.attn_scratch), B,
                                   Tn, C, NH, math, ctx);
    linear_backward<T>(cur, gl.qkv_w, gl.qkv_b, dqkv, h_in, wl.qkv_w, ones, N, C, 3 * C, math, ctx);
    grads_ready<T>(layer_ranges[l], accumulate);
  }

  // Embeddings: emb_ln = LN(word + type + pos); the [PAD] word row takes no gradient.
  zero(nxt, NC);
  layernorm_backward<T>(nxt, g.emb_ln_w, g.emb_ln_b, cur, at<T>(plan.emb), w.emb_ln_w,
                        at<float>(plan.emb_mean), at<float>(plan.emb_rstd), ln_scr, N, C, ctx);
  embeddings_backward<T>(g.word, g.pos, g.type, nxt, in<int>(batch.tokens), in<int>(batch.types),
                         config.pad_token_id, at<char>(plan.enc_scratch), plan.enc_scratch_bytes, B, Tn, C,
                         config.type_vocab_size, ctx);
  grads_ready<T>(embed_range, accumulate);  // word (the decoder's and the embeddings' writes), pos, type, LN
}

#define MPT_INSTANTIATE(T)                                      \
  template void BertDevice::Impl::forward<T>(const StepShape&); \
  template void BertDevice::Impl::losses<T>(const StepShape&);  \
  template void BertDevice::Impl::backward<T>(const StepShape&, bool);
MPT_INSTANTIATE(float)
MPT_INSTANTIATE(Bf16)
MPT_INSTANTIATE(Fp16)
#undef MPT_INSTANTIATE

}  // namespace mptrain::cuda
