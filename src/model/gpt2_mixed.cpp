// GPT-2's mixed-precision path: the forward and backward of gpt2.cpp with every activation in
// the dtype the precision policy names and every GEMM on gemm_mixed (fp32 accumulation into
// fp32 results and fp32 master gradients). Per block, forward:
//   ln1 = LN(x)            fp32 statistics, written in the linear's input dtype
//   qkv = ln1·Wqkv + b     GEMM → fp32 gemm_out, bias added in fp32, rounded once
//   y   = attention(qkv)   fp32 scores and softmax, P and y stored low precision
//   x2  = x + round(y·Wproj + b)       residual stream fp32
//   fch = round(ln2·Wfc + b); g = gelu(fch); x3 = x2 + round(g·Wfcproj + b)
// Backward feeds each GEMM its upstream gradient converted once (dout_lp, dlogits_lp) and
// accumulates dW into the fp32 gradients; LayerNorm backward stays the fp32 op.
#include <algorithm>
#include <string>

#include "backend/ops/attention.h"
#include "backend/ops/crossentropy.h"
#include "backend/ops/encoder.h"
#include "backend/ops/gelu.h"
#include "backend/ops/gemm_mixed.h"
#include "backend/ops/layernorm.h"
#include "backend/ops/residual.h"
#include "core/error.h"
#include "model/gpt2.h"

namespace mptrain {

namespace {

constexpr StorageType F32 = StorageType::F32;

// Row-major [R, Cc] and its transpose, as GemmLayouts (elements).
cpu::GemmLayout rows(int Cc) { return {0, 0, Cc, 1}; }
cpu::GemmLayout transposed(int Cc) { return {0, 0, 1, Cc}; }

}  // namespace

void Gpt2::setup_weight_copies() {
  // One buffer for every copy (model/weight_copies.h: carved in parameter-table order, refreshed
  // by forward_impl when params() marked it stale); here only the GEMMs' operands are bound.
  copies_.setup(table_, gpt2_gemm_reader, policy_);
  auto ref = [&](const std::string& name) { return copies_.ref(table_, name, params_.data()); };
  wte_c_ = ref("wte.weight");
  wc_.clear();
  for (int l = 0; l < config_.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    wc_.push_back({ref(p + "attn.c_attn.weight"), ref(p + "attn.c_proj.weight"), ref(p + "mlp.c_fc.weight"),
                   ref(p + "mlp.c_proj.weight")});
  }
}

void Gpt2::forward_mixed(const int* tokens, int B, int T) {
  const int N = B * T, C = config_.n_embd, NH = config_.n_head, Vp = config_.padded_vocab_size;
  const float eps = config_.ln_eps;
  const Policy& P = policy_;
  const StorageType ln_s = P.rule(OpKind::LayerNorm).output, lin_s = P.rule(OpKind::Linear).output;
  const StorageType y_s = P.rule(OpKind::AttnValues).output, gelu_s = P.rule(OpKind::Gelu).output;
  const cpu::GemmMath lin = cpu::gemm_math(P.rule(OpKind::Linear).compute);
  const cpu::GemmMath head = cpu::gemm_math(P.rule(OpKind::LmHead).compute);
  const cpu::AttentionTypes at = attention_types(P);
  float* acc = acts_.get(a_.gemm_out);
  // acc[N,OC] = x[N,Cin]·W[Cin,OC] in the linears' arithmetic.
  auto linear = [&](const void* x, StorageType tx, const WeightRef& w, int Cin, int OC) {
    cpu::gemm_mixed(acc, F32, rows(OC), {x, tx, rows(Cin)}, {w.ptr, w.type, rows(OC), true}, lin, 1, 1, N, OC,
                    Cin, false, *ws_, ctx_);
  };

  cpu::encoder_forward(acts_.get(a_.encoded), tokens, w_.wte, w_.wpe, B, T, C);
  const float* residual = acts_.get(a_.encoded);
  for (int l = 0; l < config_.n_layer; ++l) {
    const Gpt2LayerTensors& w = w_.layers[l];
    const LayerWeights& wc = wc_[l];
    LayerActs& la = a_.layers[l];
    void* ln1 = acts_.raw(la.ln1);
    void* qkv = acts_.raw(la.qkv);
    void* atty = acts_.raw(la.atty);
    float* residual2 = acts_.get(la.residual2);
    void* ln2 = acts_.raw(la.ln2);
    void* fch = acts_.raw(la.fch);
    void* fch_gelu = acts_.raw(la.fch_gelu);
    float* residual3 = acts_.get(la.residual3);

    cpu::layernorm_forward_typed(ln1, ln_s, acts_.get(la.ln1_mean), acts_.get(la.ln1_rstd), residual, w.ln1_w,
                                 w.ln1_b, N, C, eps);
    linear(ln1, ln_s, wc.qkv_w, C, 3 * C);
    cpu::bias_forward_typed(qkv, lin_s, acc, w.qkv_b, N, 3 * C);
    cpu::attention_forward_typed(atty, acts_.raw(la.att), qkv, acts_.raw(a_.attn_scratch), at, B, T, C, NH,
                                 *ws_, ctx_);
    linear(atty, y_s, wc.attproj_w, C, C);
    cpu::residual_bias_forward(residual2, residual, acc, w.attproj_b, lin_s, N, C);
    cpu::layernorm_forward_typed(ln2, ln_s, acts_.get(la.ln2_mean), acts_.get(la.ln2_rstd), residual2,
                                 w.ln2_w, w.ln2_b, N, C, eps);
    linear(ln2, ln_s, wc.fc_w, C, 4 * C);
    cpu::bias_gelu_forward_typed(fch, lin_s, fch_gelu, gelu_s, acc, w.fc_b, N, 4 * C);  // one pass
    linear(fch_gelu, gelu_s, wc.fcproj_w, 4 * C, C);
    cpu::residual_bias_forward(residual3, residual2, acc, w.fcproj_b, lin_s, N, C);
    residual = residual3;
  }
  void* lnf = acts_.raw(a_.lnf);
  cpu::layernorm_forward_typed(lnf, ln_s, acts_.get(a_.lnf_mean), acts_.get(a_.lnf_rstd), residual, w_.lnf_w,
                               w_.lnf_b, N, C, eps);
  // logits[N,Vp] (fp32) = lnf[N,C] · wte[Vp,C]^T
  cpu::gemm_mixed(acts_.get(a_.logits), F32, rows(Vp), {lnf, ln_s, rows(C)},
                  {wte_c_.ptr, wte_c_.type, transposed(C), true}, head, 1, 1, N, Vp, C, false, *ws_, ctx_);
}

void Gpt2::backward_mixed(const int* tokens, int B, int T) {
  const int N = B * T, C = config_.n_embd, NH = config_.n_head, Vp = config_.padded_vocab_size;
  const size_t NC = static_cast<size_t>(N) * C;
  const Policy& P = policy_;
  const StorageType ln_s = P.rule(OpKind::LayerNorm).output, lin_s = P.rule(OpKind::Linear).output;
  const StorageType y_s = P.rule(OpKind::AttnValues).output, gelu_s = P.rule(OpKind::Gelu).output;
  const cpu::GemmMath lin = cpu::gemm_math(P.rule(OpKind::Linear).compute);
  const cpu::GemmMath head = cpu::gemm_math(P.rule(OpKind::LmHead).compute);
  const StorageType lin_op = P.operand(OpKind::Linear), head_op = P.dlogits;
  const cpu::AttentionTypes at = attention_types(P);
  float* dresidual = acts_.get(a_.dresidual);
  float* dln = acts_.get(a_.dln);
  void* dout_lp = acts_.raw(a_.dout_lp);
  const void* lnf = acts_.raw(a_.lnf);

  // A linear layer's backward, given its upstream gradient dy[N,OC] as a GEMM operand:
  //   dx[N,Cin] (=, dtype tdx) = dy·W^T ;  dW[Cin,OC] += x^T·dy
  auto linear_backward = [&](void* dx, StorageType tdx, float* dW, const void* dy, StorageType tdy,
                             bool dy_ready, const void* x, StorageType tx, const WeightRef& w, int Cin,
                             int OC) {
    cpu::gemm_mixed(dx, tdx, rows(Cin), {dy, tdy, rows(OC), dy_ready}, {w.ptr, w.type, transposed(OC), true},
                    lin, 1, 1, N, Cin, OC, false, *ws_, ctx_);
    cpu::gemm_mixed(dW, F32, rows(OC), {x, tx, transposed(Cin)}, {dy, tdy, rows(OC), dy_ready}, lin, 1, 1,
                    Cin, OC, N, true, *ws_, ctx_);
  };

  // LM head: logits = lnf · wte^T  =>  dlnf = dlogits · wte ; dwte += dlogits^T · lnf
  void* dlogits = acts_.raw(a_.dlogits_lp);
  if (!dlogits_lp_ready_)  // else the loss wrote it (Gpt2::loss_impl)
    cpu::to_gemm_operand(dlogits, acts_.get(a_.logits), F32, static_cast<size_t>(N) * Vp, head, *ws_);
  cpu::gemm_mixed(dln, F32, rows(C), {dlogits, head_op, rows(Vp), true},
                  {wte_c_.ptr, wte_c_.type, rows(C), true}, head, 1, 1, N, C, Vp, false, *ws_, ctx_);
  cpu::gemm_mixed(g_.wte, F32, rows(C), {dlogits, head_op, transposed(Vp), true}, {lnf, ln_s, rows(C)}, head,
                  1, 1, Vp, C, N, true, *ws_, ctx_);

  const float* last_residual =
      config_.n_layer > 0 ? acts_.get(a_.layers.back().residual3) : acts_.get(a_.encoded);
  std::fill(dresidual, dresidual + NC, 0.0f);
  cpu::layernorm_backward(dresidual, g_.lnf_w, g_.lnf_b, dln, last_residual, w_.lnf_w, acts_.get(a_.lnf_mean),
                          acts_.get(a_.lnf_rstd), N, C);

  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const Gpt2LayerTensors& w = w_.layers[l];
    const Gpt2LayerTensors& g = g_.layers[l];
    const LayerWeights& wc = wc_[l];
    LayerActs& la = a_.layers[l];
    const float* residual = l == 0 ? acts_.get(a_.encoded) : acts_.get(a_.layers[l - 1].residual3);
    float* dfch_gelu = acts_.get(a_.dfch_gelu);
    void* dfch = acts_.raw(a_.dfch);
    void* dqkv = acts_.raw(a_.dqkv);
    void* datty = acts_.raw(a_.datty);

    // MLP: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
    cpu::to_gemm_operand(dout_lp, dresidual, F32, NC, lin, *ws_);
    linear_backward(dfch_gelu, F32, g.fcproj_w, dout_lp, lin_op, true, acts_.raw(la.fch_gelu), gelu_s,
                    wc.fcproj_w, 4 * C, C);
    cpu::bias_backward_typed(g.fcproj_b, dresidual, F32, N, C);
    // dfch is written in the operand storage but not rounded to TF32 / fp16 when those are
    // emulated in fp32 (not `ready`): gemm_mixed rounds it.
    cpu::gelu_backward_typed(dfch, lin_op, acts_.raw(la.fch), lin_s, dfch_gelu, 4 * NC);
    linear_backward(dln, F32, g.fc_w, dfch, lin_op, false, acts_.raw(la.ln2), ln_s, wc.fc_w, C, 4 * C);
    cpu::bias_backward_typed(g.fc_b, dfch, lin_op, N, 4 * C);
    cpu::layernorm_backward(dresidual, g.ln2_w, g.ln2_b, dln, acts_.get(la.residual2), w.ln2_w,
                            acts_.get(la.ln2_mean), acts_.get(la.ln2_rstd), N, C);

    // Attention: residual2 = residual + attproj(attention(qkv(ln1(residual))))
    cpu::to_gemm_operand(dout_lp, dresidual, F32, NC, lin, *ws_);
    linear_backward(datty, y_s, g.attproj_w, dout_lp, lin_op, true, acts_.raw(la.atty), y_s, wc.attproj_w, C,
                    C);
    cpu::bias_backward_typed(g.attproj_b, dresidual, F32, N, C);
    cpu::attention_backward_typed(dqkv, datty, acts_.raw(la.qkv), acts_.raw(la.att),
                                  acts_.raw(a_.attn_scratch), at, B, T, C, NH, *ws_, ctx_);
    linear_backward(dln, F32, g.qkv_w, dqkv, lin_s, false, acts_.raw(la.ln1), ln_s, wc.qkv_w, C, 3 * C);
    cpu::bias_backward_typed(g.qkv_b, dqkv, lin_s, N, 3 * C);
    cpu::layernorm_backward(dresidual, g.ln1_w, g.ln1_b, dln, residual, w.ln1_w, acts_.get(la.ln1_mean),
                            acts_.get(la.ln1_rstd), N, C);
  }
  cpu::encoder_backward(g_.wte, g_.wpe, dresidual, tokens, B, T, C);
}

}  // namespace mptrain
