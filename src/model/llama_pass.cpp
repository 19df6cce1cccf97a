// Llama's forward and backward, written once over the op interface (as gpt2_pass.cpp). Per block
// (QKV = (NH + 2·KV)·HS, nn.Linear weights [out, in] read transposed), forward:
//   ln1  = RMSNorm(x)                             in the linear's input dtype, fp32 statistics
//   qkv  = ln1·Wqkvᵀ                              q | k | v in one product, no bias
//   [QK-norm: qkv_raw = that product; qkv = qkv_raw with each q and k head RMSNormed]
//   rope(qkv) on its first NH + KV heads          q and k turned in place by their positions
//   y    = attention(qkv), KV key/value heads     causal; what it saves is the backend's choice
//   x2   = x + round(y·Woᵀ)                       the residual add in the linear's epilogue
//   gu   = RMSNorm(x2)·Wguᵀ                       gate | up in one product
//   a    = silu(gate)·up                          (ReLU²: up = RMSNorm(x2)·Wupᵀ, a = relu(up)²)
//   x3   = x2 + round(a·Wdownᵀ)
// Backward mirrors it. The attention's backward gives the gradient of the turned q and k; the
// inverse rotation (the rotation's transpose) turns it back into the gradient of the product's
// output. RMSNorm's backward accumulates into dresidual, the residual stream's gradient.
#include <string>

#include "core/error.h"
#include "model/llama.h"

namespace mptrain {

namespace {

// nn.Linear's weight [OC, Cin] as the [Cin, OC] operand a linear multiplies by.
View linear_weight(const WeightRef& w, std::int64_t oc, std::int64_t cin) {
  return View::of(w.ptr, w.type, {oc, cin}).t();
}

// Heads [first, first + count) of every row of qkv [N, QKV], as rows of HS (NormRows' layout).
View heads(const View& qkv, int first, int count, int HS) {
  View v = qkv;
  v.ptr = static_cast<char*>(qkv.ptr) + static_cast<size_t>(first) * HS * storage_bytes(qkv.type);
  v.rank = 3;
  v.shape = {qkv.dim(0), count, HS, 0};
  v.stride = {qkv.dim(1), HS, 1, 0};
  return v;
}

}  // namespace

// QK-norm (Qwen3's form): qkv = qkv_raw, then each q head and each k head RMSNormed over its HS
// channels with the layer's q_norm / k_norm weights (v copied as it is).
void Llama::qk_norm_forward(const LlamaLayerTensors& w, const LlamaLayerActs& la, const View& qkv, int N) {
  const int NH = config_.n_head, KV = config_.n_kv_head, HS = config_.head_size();
  const View raw = acts_.view(la.qkv_raw, N, qkv.dim(1));
  be_->cast(qkv, raw);
  be_->layernorm({.out = heads(qkv, 0, NH, HS),
                  .rstd = acts_.row(la.q_rstd, static_cast<std::int64_t>(N) * NH),
                  .x = heads(raw, 0, NH, HS),
                  .gamma = small(w.q_norm, {HS}),
                  .eps = config_.rms_eps,
                  .rms = true});
  be_->layernorm({.out = heads(qkv, NH, KV, HS),
                  .rstd = acts_.row(la.k_rstd, static_cast<std::int64_t>(N) * KV),
                  .x = heads(raw, NH, KV, HS),
                  .gamma = small(w.k_norm, {HS}),
                  .eps = config_.rms_eps,
                  .rms = true});
}

// The norms' backward in place in dqkv's q and k heads (written, not accumulated): dqkv becomes the
// gradient of qkv_raw, the product's output.
void Llama::qk_norm_backward(const LlamaLayerTensors& w, const LlamaLayerTensors& g, const LlamaLayerActs& la,
                             const View& dqkv, int N) {
  const int NH = config_.n_head, KV = config_.n_kv_head, HS = config_.head_size();
  const View raw = acts_.view(la.qkv_raw, N, dqkv.dim(1));
  const auto norm_backward = [&](int first, int count, const float* gamma, const float* dgamma,
                                 ActivationPlan::Handle rstd) {
    const View d = heads(dqkv, first, count, HS);
    be_->layernorm_backward({.dx = d,
                             .dgamma = grad(dgamma, {HS}),
                             .dout = d,
                             .x = heads(raw, first, count, HS),
                             .gamma = small(gamma, {HS}),
                             .rstd = acts_.row(rstd, static_cast<std::int64_t>(N) * count),
                             .rms = true,
                             .accumulate = false});
  };
  norm_backward(0, NH, w.q_norm, g.q_norm, la.q_rstd);
  norm_backward(NH, KV, w.k_norm, g.k_norm, la.k_rstd);
}

// The block's RMSNorm `which` (1: before the attention, 2: before the MLP) of `residual`, with its
// saved statistics.
void Llama::block_norm(int l, int which, const View& residual, int N) {
  const LlamaLayerTensors& w = w_.layers[l];
  const LlamaLayerActs& la = a_.layers[l];
  const int C = config_.n_embd;
  if (which == 1)
    rmsnorm(acts_.view(la.ln1, N, C), residual, w.attn_norm, la.ln1_rstd, config_.rms_eps);
  else
    rmsnorm(acts_.view(la.ln2, N, C), residual, w.mlp_norm, la.ln2_rstd, config_.rms_eps);
}

// The MLP's input product (gate | up, or up) from ln2, and its activation.
void Llama::block_mlp_in(int l, int N) {
  const LlamaLayerActs& la = a_.layers[l];
  const int C = config_.n_embd, I = config_.intermediate, MI = mlp_in();
  const View gate_up = acts_.view(la.gate_up, N, MI), act = acts_.view(la.act, N, I);
  linear({.out = gate_up,
          .x = acts_.view(la.ln2, N, C),
          .w = linear_weight(wc_[l].gate_up, MI, C),
          .scratch = acts_.work(a_.gemm_out)});
  if (config_.mlp == LlamaMlp::Relu2)
    be_->relu2({.out = act, .x = gate_up});
  else
    be_->swiglu({.out = act, .gate_up = gate_up});
}

void Llama::forward_block(int l, const View& residual, int B, int T) {
  Backend& be = *be_;
  const int N = B * T, C = config_.n_embd, NH = config_.n_head, KV = config_.n_kv_head,
            HS = config_.head_size(), I = config_.intermediate;
  const int QKV = C + 2 * config_.kv_width();
  const View acc = acts_.work(a_.gemm_out);
  const LlamaLayerTensors& w = w_.layers[l];
  const LayerWeights& wc = wc_[l];
  const LlamaLayerActs& la = a_.layers[l];
  const View ln1 = acts_.view(la.ln1, N, C), qkv = acts_.view(la.qkv, N, QKV),
             atty = acts_.view(la.atty, N, C);
  const View residual2 = acts_.view(la.residual2, N, C);
  block_norm(l, 1, residual, N);
  const View product = config_.qk_norm ? acts_.view(la.qkv_raw, N, QKV) : qkv;
  linear({.out = product, .x = ln1, .w = linear_weight(wc.qkv, QKV, C), .scratch = acc});
  if (config_.qk_norm) qk_norm_forward(w, la, qkv, N);
  be.rope({.x = qkv, .T = T, .heads = NH + KV, .head_size = HS, .theta = config_.rope_theta});
  attention(atty, qkv, la.att, a_.attn_scratch, B, T, NH, /*causal=*/true, {}, {}, KV);
  linear({.out = residual2,
          .x = atty,
          .w = linear_weight(wc.o, C, C),
          .epilogue = Epilogue::BiasResidual,
          .residual = residual,
          .scratch = acc});
  block_norm(l, 2, residual2, N);
  block_mlp_in(l, N);
  linear({.out = acts_.view(la.residual3, N, C),
          .x = acts_.view(la.act, N, I),
          .w = linear_weight(wc.down, C, I),
          .epilogue = Epilogue::BiasResidual,
          .residual = residual2,
          .scratch = acc});
}

void Llama::forward_impl(int B, int T) {
  Backend& be = *be_;
  const int N = B * T, C = config_.n_embd, Vp = config_.padded_vocab_size;

  // Tied, a GPU's plan reads the table through the head's 16-bit copy, as GPT-2's wte.
  const View table = config_.tie_embeddings && policy_.small_weights != StorageType::F32
                         ? View::of(head_c_.ptr, head_c_.type, {Vp, C})
                         : small(w_.embed, {Vp, C});
  be.embedding({.out = acts_.view(a_.encoded, N, C), .tokens = ids(), .B = B, .T = T, .word = table});
  View residual = acts_.view(a_.encoded, N, C);
  for (int l = 0; l < config_.n_layer; ++l) {
    forward_block(l, residual, B, T);
    residual = acts_.view(a_.layers[l].residual3, N, C);
  }
  rmsnorm(acts_.view(a_.lnf, N, C), residual, w_.norm, a_.lnf_rstd, config_.rms_eps);
  // logits[N,Vp] = lnf[N,C] · head[Vp,C]^T
  linear({.out = acts_.view(a_.head.logits, N, Vp),
          .x = acts_.view(a_.lnf, N, C),
          .w = linear_weight(head_c_, Vp, C)},
         OpRole::LmHead);
}

void Llama::backward_impl(int B, int T) {
  Backend& be = *be_;
  wgrads_.begin(be);  // a GPU's plan: this micro-batch's 16-bit weight gradients start at 0
  const int N = B * T, C = config_.n_embd, NH = config_.n_head, KV = config_.n_kv_head,
            HS = config_.head_size(), I = config_.intermediate, Vp = config_.padded_vocab_size;
  const int QKV = C + 2 * config_.kv_width(), MI = mlp_in();
  const bool relu2 = config_.mlp == LlamaMlp::Relu2;
  const View dresidual = acts_.view(a_.dresidual, N, C), dln = acts_.view(a_.dln, N, C);
  const auto grad_t = [&](const float* g, std::int64_t oc, std::int64_t cin) {
    return grad(g, {oc, cin}).t();
  };

  // The head: logits = lnf · head^T  =>  dlnf = dlogits · head ; dhead += dlogits^T · lnf.
  head_backward(dln, grad_t(g_.head, Vp, C), acts_.view(a_.lnf, N, C), linear_weight(head_c_, Vp, C), N);
  if (!config_.tie_embeddings) wgrads_.ready(be, grads_, table_.range("lm_head."));
  const View last =
      config_.n_layer > 0 ? acts_.view(a_.layers.back().residual3, N, C) : acts_.view(a_.encoded, N, C);
  be.zero(dresidual);
  rmsnorm_backward(dresidual, dln, last, w_.norm, g_.norm, a_.lnf_rstd);
  wgrads_.ready(be, grads_, table_.range("model.norm."));

  const View dqkv = acts_.view(a_.dqkv, N, QKV), datty = acts_.view(a_.datty, N, C);
  // ReLU²: its backward in place in dact, which is then the up product's gradient.
  const View dact = acts_.view(a_.dact, N, I), dgate_up = relu2 ? dact : acts_.view(a_.dgate_up, N, MI);
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const LlamaLayerTensors& w = w_.layers[l];
    const LlamaLayerTensors& g = g_.layers[l];
    const LayerWeights& wc = wc_[l];
    const LlamaLayerActs& la = a_.layers[l];
    const View residual =
        l == 0 ? acts_.view(a_.encoded, N, C) : acts_.view(a_.layers[l - 1].residual3, N, C);
    // --recompute: refill what this block's backward reads and the forward did not keep, through
    // the forward's own ops (the same bits); the norms share one buffer, so ln1 is refilled again
    // before the attention's half reads it (as GPT-2's).
    const RecomputeSet rc = config_.recompute;
    const bool block = rc.has(Recompute::Block), shared_norm = block || rc.has(Recompute::Norm);
    if (block) {
      forward_block(l, residual, B, T);
    } else {
      if (shared_norm) block_norm(l, 2, acts_.view(la.residual2, N, C), N);
      if (rc.has(Recompute::Mlp)) block_mlp_in(l, N);
    }

    // MLP: residual3 = residual2 + down(swiglu(gate_up(rms2(residual2))))
    linear_backward({.dx = dact,
                     .dw = grad_t(g.down, C, I),
                     .dy = dresidual,
                     .x = acts_.view(la.act, N, I),
                     .w = linear_weight(wc.down, C, I),
                     .scratch = acts_.work(a_.dout_lp)});
    const View gate_up = acts_.view(la.gate_up, N, MI);
    if (relu2)
      be.relu2_backward({.dx = dact, .dout = dact, .x = gate_up});
    else
      be.swiglu_backward({.dgate_up = dgate_up, .dout = dact, .gate_up = gate_up});
    linear_backward({.dx = dln,
                     .dw = grad_t(g.gate_up, MI, C),
                     .dy = dgate_up,
                     .x = acts_.view(la.ln2, N, C),
                     .w = linear_weight(wc.gate_up, MI, C)});
    rmsnorm_backward(dresidual, dln, acts_.view(la.residual2, N, C), w.mlp_norm, g.mlp_norm, la.ln2_rstd);

    // Attention: residual2 = residual + o(attention(rope(qkv(rms1(residual)))))
    const View qkv = acts_.view(la.qkv, N, QKV);  // as the attention read it: q and k turned
    linear_backward({.dx = datty,
                     .dw = grad_t(g.o, C, C),
                     .dy = dresidual,
                     .x = acts_.view(la.atty, N, C),
                     .w = linear_weight(wc.o, C, C),
                     .scratch = acts_.work(a_.dout_lp)});
    // --recompute attention: what the attention keeps, again from the saved (turned) qkv.
    if (rc.has(Recompute::Attention) && !block)
      attention(acts_.view(la.atty, N, C), qkv, la.att, a_.attn_scratch, B, T, NH, /*causal=*/true, {}, {},
                KV);
    attention_backward(dqkv, datty, acts_.view(la.atty, N, C), qkv, la.att, a_.attn_scratch, B, T, NH,
                       /*causal=*/true, {}, KV);
    be.rope(
        {.x = dqkv, .T = T, .heads = NH + KV, .head_size = HS, .theta = config_.rope_theta, .inverse = true});
    if (config_.qk_norm) qk_norm_backward(w, g, la, dqkv, N);
    if (shared_norm) block_norm(l, 1, residual, N);
    linear_backward({.dx = dln,
                     .dw = grad_t(g.qkv, QKV, C),
                     .dy = dqkv,
                     .x = acts_.view(la.ln1, N, C),
                     .w = linear_weight(wc.qkv, QKV, C)});
    rmsnorm_backward(dresidual, dln, residual, w.attn_norm, g.attn_norm, la.ln1_rstd);
    wgrads_.ready(be, grads_, table_.range("model.layers." + std::to_string(l) + "."));
  }
  be.embedding_backward(
      {.dword = grad(g_.embed, {Vp, C}), .dout = dresidual, .tokens = ids(), .B = B, .T = T});
  // The embeddings (the head too, when tied) are final now, the last range handed.
  wgrads_.finish(be, grads_);
}

}  // namespace mptrain
