// GPT-2's forward, loss and backward, written once over the op interface (backend/backend.h):
// every precision runs this code, with each tensor in the dtype the policy gives it and each
// GEMM weight read through its copy (model/weight_copies.h; the master itself when fp32).
// Per block, forward:
//   ln1  = LN(x)                                  in the linear's input dtype, fp32 statistics
//   qkv  = ln1·Wqkv + b                           one rounding from the fp32 accumulator
//   y    = attention(qkv)                         what it saves is the backend's choice
//   x2   = x + round(y·Wproj + b)                 the residual add in the linear's epilogue
//   fch  = round(ln2·Wfc + b); g = gelu(fch)      one epilogue writes both
//   x3   = x2 + round(g·Wfcproj + b)
// Backward mirrors it: each linear_backward writes its input gradient (=) and accumulates dW,
// db (+=) into the fp32 master gradients; LayerNorm backward accumulates into dresidual, the
// gradient of the residual stream, so each branch adds its share.
#include <string>

#include "core/error.h"
#include "model/gpt2.h"

namespace mptrain {

namespace {

View weight(const WeightRef& w, std::int64_t r, std::int64_t c) { return View::of(w.ptr, w.type, {r, c}); }

}  // namespace

void Gpt2::setup_weight_copies() {
  // One buffer for every copy (model/weight_copies.h: carved in parameter-table order, refreshed
  // by forward_impl when params() marked it stale); an fp32 GEMM reads its master weight.
  copies_.setup(table_, gpt2_gemm_reader, policy_, be_->memory());
  auto ref = [&](const std::string& name) { return copies_.ref(table_, name, params_.data()); };
  wte_c_ = ref("wte.weight");
  wc_.clear();
  for (int l = 0; l < config_.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    wc_.push_back({ref(p + "attn.c_attn.weight"), ref(p + "attn.c_proj.weight"), ref(p + "mlp.c_fc.weight"),
                   ref(p + "mlp.c_proj.weight")});
  }
}

void Gpt2::block_layernorm(int l, int which, const View& residual, int N) {
  const Gpt2LayerTensors& w = w_.layers[l];
  const LayerActs& la = a_.layers[l];
  const int C = config_.n_embd;
  if (which == 1)
    layernorm(acts_.view(la.ln1, N, C), residual, w.ln1_w, w.ln1_b, la.ln1_mean, la.ln1_rstd, config_.ln_eps);
  else
    layernorm(acts_.view(la.ln2, N, C), residual, w.ln2_w, w.ln2_b, la.ln2_mean, la.ln2_rstd, config_.ln_eps);
}

void Gpt2::block_fc(int l, int N) {
  const LayerActs& la = a_.layers[l];
  const int C = config_.n_embd;
  linear({.out = acts_.view(la.fch_gelu, N, 4 * C),
          .x = acts_.view(la.ln2, N, C),
          .w = weight(wc_[l].fc_w, C, 4 * C),
          .bias = small(w_.layers[l].fc_b, {4 * C}),
          .epilogue = Epilogue::BiasGelu,
          .pre = acts_.view(la.fch, N, 4 * C),
          .scratch = acts_.work(a_.gemm_out)});
}

void Gpt2::forward_block(int l, const View& residual, int B, int T) {
  const int N = B * T, C = config_.n_embd, NH = config_.n_head;
  const View acc = acts_.work(a_.gemm_out);
  const Gpt2LayerTensors& w = w_.layers[l];
  const LayerWeights& wc = wc_[l];
  const LayerActs& la = a_.layers[l];
  const View ln1 = acts_.view(la.ln1, N, C), qkv = acts_.view(la.qkv, N, 3 * C), atty = acts_.view(la.atty, N, C);
  const View residual2 = acts_.view(la.residual2, N, C);
  block_layernorm(l, 1, residual, N);
  linear({.out = qkv, .x = ln1, .w = weight(wc.qkv_w, C, 3 * C), .bias = small(w.qkv_b, {3 * C}), .scratch = acc});
  attention(atty, qkv, la.att, a_.attn_scratch, B, T, NH, /*causal=*/true);
  linear({.out = residual2,
          .x = atty,
          .w = weight(wc.attproj_w, C, C),
          .bias = small(w.attproj_b, {C}),
          .epilogue = Epilogue::BiasResidual,
          .residual = residual,
          .scratch = acc});
  block_layernorm(l, 2, residual2, N);
  block_fc(l, N);
  linear({.out = acts_.view(la.residual3, N, C),
          .x = acts_.view(la.fch_gelu, N, 4 * C),
          .w = weight(wc.fcproj_w, 4 * C, C),
          .bias = small(w.fcproj_b, {C}),
          .epilogue = Epilogue::BiasResidual,
          .residual = residual2,
          .scratch = acc});
}

void Gpt2::forward_impl(int B, int T) {
  Backend& be = *be_;
  const int N = B * T, C = config_.n_embd, Vp = config_.padded_vocab_size;

  be.embedding(
      {.out = acts_.view(a_.encoded, N, C),
       .tokens = ids(),
       .B = B,
       .T = T,
       // A GPU's plan reads wte through the LM head's 16-bit copy, as every small weight.
       .word = policy_.small_weights == StorageType::F32 ? View::f32(w_.wte, {Vp, C}) : weight(wte_c_, Vp, C),
       .pos = small(w_.wpe, {config_.block_size, C})});
  View residual = acts_.view(a_.encoded, N, C);
  for (int l = 0; l < config_.n_layer; ++l) {
    forward_block(l, residual, B, T);
    residual = acts_.view(a_.layers[l].residual3, N, C);
  }
  layernorm(acts_.view(a_.lnf, N, C), residual, w_.lnf_w, w_.lnf_b, a_.lnf_mean, a_.lnf_rstd, config_.ln_eps);
  // logits[N,Vp] = lnf[N,C] · wte[Vp,C]^T, written in place (no bias, no epilogue).
  linear({.out = acts_.view(a_.logits, N, Vp), .x = acts_.view(a_.lnf, N, C), .w = weight(wte_c_, Vp, C).t()},
         OpRole::LmHead);
}

void Gpt2::backward_impl(int B, int T) {
  Backend& be = *be_;
  wgrads_.begin(be);  // a GPU's plan: this micro-batch's 16-bit weight gradients start at 0
  const int N = B * T, C = config_.n_embd, NH = config_.n_head, Vp = config_.padded_vocab_size;
  const View dresidual = acts_.view(a_.dresidual, N, C), dln = acts_.view(a_.dln, N, C);

  // LM head: logits = lnf · wte^T  =>  dlnf = dlogits · wte ; dwte += dlogits^T · lnf.
  head_backward(dln, grad(g_.wte, {Vp, C}).t(), acts_.view(a_.lnf, N, C), weight(wte_c_, Vp, C).t(), N);

  const View last =
      config_.n_layer > 0 ? acts_.view(a_.layers.back().residual3, N, C) : acts_.view(a_.encoded, N, C);
  be.zero(dresidual);
  layernorm_backward(dresidual, dln, last, w_.lnf_w, g_.lnf_w, g_.lnf_b, a_.lnf_mean, a_.lnf_rstd);
  wgrads_.ready(be, grads_, table_.range("ln_f."));

  // dresidual holds the gradient of the current layer's output; each LayerNorm backward adds
  // the share that flows through its branch.
  const View dfch_gelu = acts_.view(a_.dfch_gelu, N, 4 * C), datty = acts_.view(a_.datty, N, C);
  const View dqkv = acts_.view(a_.dqkv, N, 3 * C);
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const Gpt2LayerTensors& w = w_.layers[l];
    const Gpt2LayerTensors& g = g_.layers[l];
    const LayerWeights& wc = wc_[l];
    const LayerActs& la = a_.layers[l];
    const View residual =
        l == 0 ? acts_.view(a_.encoded, N, C) : acts_.view(a_.layers[l - 1].residual3, N, C);
    // --recompute: refill what this block's backward reads and the forward did not keep, through
    // the forward's own ops (the same bits). The LayerNorm outputs share one buffer, so ln1 is
    // refilled again before the attention's half reads it.
    const RecomputeSet rc = config_.recompute;
    const bool block = rc.has(Recompute::Block), shared_ln = block || rc.has(Recompute::Norm);
    if (block) {
      forward_block(l, residual, B, T);
    } else {
      if (shared_ln) block_layernorm(l, 2, acts_.view(la.residual2, N, C), N);
      if (rc.has(Recompute::Mlp))
        block_fc(l, N);
      else if (rc.has(Recompute::Gelu))  // the epilogue's GELU of the saved fc output
        be.gelu({.out = acts_.view(la.fch_gelu, N, 4 * C), .x = acts_.view(la.fch, N, 4 * C)});
    }

    // MLP: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2)))). GELU's derivative goes into
    // fcproj's dx product under a GPU's plan (cuBLASLt's DGELU epilogue; the same values on a CPU
    // under that plan, whose 16-bit dx is rounded before it either way), else into fc's backward.
    const View fch = acts_.view(la.fch, N, 4 * C);
    const bool gelu_in_dx = policy_.caps.lowp_between_ops;
    linear_backward({.dx = dfch_gelu,
                     .dw = grad(g.fcproj_w, {4 * C, C}),
                     .db = grad(g.fcproj_b, {C}),
                     .dy = dresidual,
                     .x = acts_.view(la.fch_gelu, N, 4 * C),
                     .w = weight(wc.fcproj_w, 4 * C, C),
                     .scratch = acts_.work(a_.dout_lp),
                     .x_epilogue = gelu_in_dx ? Epilogue::BiasGelu : Epilogue::Bias,
                     .x_pre = gelu_in_dx ? fch : View{}});
    linear_backward({.dx = dln,
                     .dw = grad(g.fc_w, {C, 4 * C}),
                     .db = grad(g.fc_b, {4 * C}),
                     .dy = dfch_gelu,
                     .x = acts_.view(la.ln2, N, C),
                     .w = weight(wc.fc_w, C, 4 * C),
                     .epilogue = gelu_in_dx ? Epilogue::Bias : Epilogue::BiasGelu,
                     .pre = gelu_in_dx ? View{} : fch,
                     .scratch = acts_.work(a_.dfch)});
    layernorm_backward(dresidual, dln, acts_.view(la.residual2, N, C), w.ln2_w, g.ln2_w, g.ln2_b, la.ln2_mean,
                       la.ln2_rstd);

    // Attention: residual2 = residual + attproj(attention(qkv(ln1(residual))))
    linear_backward({.dx = datty,
                     .dw = grad(g.attproj_w, {C, C}),
                     .db = grad(g.attproj_b, {C}),
                     .dy = dresidual,
                     .x = acts_.view(la.atty, N, C),
                     .w = weight(wc.attproj_w, C, C),
                     .scratch = acts_.work(a_.dout_lp)});
    // --recompute attention: what the attention keeps, again from the saved qkv (its output
    // rewritten with the bits it has).
    if (rc.has(Recompute::Attention) && !block)
      attention(acts_.view(la.atty, N, C), acts_.view(la.qkv, N, 3 * C), la.att, a_.attn_scratch, B, T, NH,
                /*causal=*/true);
    attention_backward(dqkv, datty, acts_.view(la.atty, N, C), acts_.view(la.qkv, N, 3 * C), la.att,
                       a_.attn_scratch, B, T, NH, /*causal=*/true);
    if (shared_ln) block_layernorm(l, 1, residual, N);
    linear_backward({.dx = dln,
                     .dw = grad(g.qkv_w, {C, 3 * C}),
                     .db = grad(g.qkv_b, {3 * C}),
                     .dy = dqkv,
                     .x = acts_.view(la.ln1, N, C),
                     .w = weight(wc.qkv_w, C, 3 * C)});
    layernorm_backward(dresidual, dln, residual, w.ln1_w, g.ln1_w, g.ln1_b, la.ln1_mean, la.ln1_rstd);
    wgrads_.ready(be, grads_, table_.range("h." + std::to_string(l) + "."));
  }
  be.embedding_backward({.dword = grad(g_.wte, {Vp, C}),
                         .dpos = grad(g_.wpe, {config_.block_size, C}),
                         .dout = dresidual,
                         .tokens = ids(),
                         .B = B,
                         .T = T});
  // The embeddings (wte also the LM head's) are final now, the last range handed.
  wgrads_.finish(be, grads_);
}

}  // namespace mptrain
