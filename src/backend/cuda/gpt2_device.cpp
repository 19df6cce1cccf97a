// GPT-2 training on one GPU (gpt2_device.h): the buffer plan, and the forward and backward of
// model/gpt2.cpp written out with the CUDA launchers, templated on the one storage type T of
// the precision (gpt2_device.h states the mapping and the deviations). The optimizer step is in
// gpt2_device_optim.cpp; the private state both share in gpt2_device_impl.h.
#include "backend/cuda/gpt2_device.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cuda/attention.h"
#include "backend/cuda/cast.h"
#include "backend/cuda/crossentropy.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/dispatch.h"
#include "backend/cuda/encoder.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/gelu.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gpt2_device_impl.h"
#include "backend/cuda/grad_ready.h"
#include "backend/cuda/layernorm.h"
#include "backend/cuda/matmul.h"
#include "backend/cuda/residual.h"
#include "backend/cuda/softmax.h"
#include "backend/cuda/widen_grads.h"
#include "core/error.h"
#include "model/gpt2.h"

namespace mptrain::cuda {

void Gpt2Device::Impl::plan_buffers() {
  const size_t BT = static_cast<size_t>(plan_B) * plan_T, C = config.n_embd, Vp = config.padded_vocab_size;
  const size_t es = storage_bytes(t), f = sizeof(float);
  const int NH = config.n_head;
  // Flash saves lse [B,NH,T] (its other input, the output, is atty, saved anyway); the naive
  // path the probabilities [B,NH,T,T].
  const bool flash = options.attention == Gpt2Attention::Flash;
  const size_t att_saved = flash ? flash_attention_saved_bytes(plan_B, plan_T, NH)
                                 : attention_saved_bytes(plan_B, plan_T, config.n_embd, NH, t);
  const size_t att_scratch = flash ? flash_attention_scratch_bytes(plan_B, plan_T, NH)
                                   : attention_scratch_bytes(plan_B, plan_T, config.n_embd, NH, t);
  encoded = arena.add(BT * C * es);
  for (int l = 0; l < config.n_layer; ++l) {
    LayerActs la{};
    la.ln1 = arena.add(BT * C * es);
    la.ln1_mean = arena.add(BT * f);
    la.ln1_rstd = arena.add(BT * f);
    la.qkv = arena.add(BT * 3 * C * es);
    la.att = arena.add(att_saved);
    la.atty = arena.add(BT * C * es);
    la.residual2 = arena.add(BT * C * es);
    la.ln2 = arena.add(BT * C * es);
    la.ln2_mean = arena.add(BT * f);
    la.ln2_rstd = arena.add(BT * f);
    la.fch = arena.add(BT * 4 * C * es);
    la.fch_gelu = arena.add(BT * 4 * C * es);
    la.residual3 = arena.add(BT * C * es);
    layers.push_back(la);
  }
  lnf = arena.add(BT * C * es);
  lnf_mean = arena.add(BT * f);
  lnf_rstd = arena.add(BT * f);
  logits = arena.add(BT * Vp * es);  // dlogits in place
  if (!options.fused) probs = arena.add(BT * Vp * f);
  losses = arena.add(BT * f);
  inputs = arena.add(3 * BT * sizeof(int32_t));  // tokens | targets | dloss
  // Scratch shared by every layer (not saved for backward).
  proj = arena.add(BT * C * es);
  dresidual = arena.add(BT * C * es);
  dln = arena.add(BT * C * es);
  dqkv = arena.add(BT * 3 * C * es);
  datty = arena.add(BT * C * es);
  dfch = arena.add(BT * 4 * C * es);
  attn_scratch = arena.add(att_scratch);
  ln_scratch = arena.add(layernorm_backward_scratch_floats(static_cast<int>(BT), config.n_embd) * f);
  enc_scratch_bytes = encoder_backward_scratch_bytes(plan_B, plan_T);
  enc_scratch = arena.add(enc_scratch_bytes);

  params = DeviceMemory(n * f);
  grads = DeviceMemory(n * f);
  if (lowp) {
    params_lp = DeviceMemory(n * es);
    grads_lp = DeviceMemory(n * es);
  }
  acts = DeviceMemory(arena.size());
  // The largest GEMM bias gradient (c_fc's, 4C in T) goes through Context::scratch: grow it
  // now, so that the first backward does not (a growth syncs and cudaFree syncs the whole
  // device, NCCL's stream included, in the middle of an overlapped reduction).
  ctx.scratch(4 * C * es);
  fill_bytes(params.get(), 0, n * f, ctx);
  fill_bytes(grads.get(), 0, n * f, ctx);
  if (lowp) fill_bytes(params_lp.get(), 0, n * es, ctx);
  ctx.synchronize();
}

// The gradient-ready ranges (gpt2_device.h): each layer's tensors are contiguous in the table
// (gpt2_param_table: wte, wpe, h.0 ... h.L-1, ln_f), which is checked here, not assumed
// (grad_ready.h).
std::vector<std::pair<size_t, size_t>> Gpt2Device::grad_ready_ranges(const Gpt2Config& config) {
  const ParamTable table = gpt2_param_table(config);
  const std::string who = "[gpt2-cuda]";
  std::vector<std::pair<size_t, size_t>> ranges{prefixed_range(table, {"ln_f."}, who)};
  for (int l = config.n_layer - 1; l >= 0; --l)
    ranges.push_back(prefixed_range(table, {"h." + std::to_string(l) + "."}, who));
  ranges.push_back(prefixed_range(table, {"wte.", "wpe."}, who));
  check_top_down_tiling(ranges, table.total(),
                        who + " the parameter table is not wte, wpe, h.0 ... h.L-1, ln_f in order");
  return ranges;
}

void Gpt2Device::Impl::plan_grad_ranges() {
  const std::vector<std::pair<size_t, size_t>> r = grad_ready_ranges(config);
  const int L = config.n_layer;
  lnf_range = {r.front().first, r.front().second};
  layer_ranges.assign(L, ParamRange{});
  for (int l = 0; l < L; ++l) layer_ranges[l] = {r[1 + (L - 1 - l)].first, r[1 + (L - 1 - l)].second};
  embed_range = {r.back().first, r.back().second};
}

template <class T>
void Gpt2Device::Impl::residual_layernorm(T* residual_out, T* out, float* mean, float* rstd, const T* a, const T* b,
                                          const T* weight, const T* bias, int N) {
  const int C = config.n_embd;
  if (options.fused) {
    residual_layernorm_forward<T>(residual_out, out, mean, rstd, a, b, weight, bias, N, C, config.ln_eps, ctx);
  } else {
    residual_forward<T>(residual_out, a, b, static_cast<size_t>(N) * C, ctx);
    layernorm_forward<T>(out, mean, rstd, residual_out, weight, bias, N, C, config.ln_eps, ctx);
  }
}

// out (=) atty; saved state into a.att (flash: lse; naive: the probabilities).
template <class T>
void Gpt2Device::Impl::attention_fwd(const LayerActs& a, int B, int Tn) {
  const int C = config.n_embd, NH = config.n_head;
  if (options.attention == Gpt2Attention::Flash)
    flash_attention_forward<T>(at<T>(a.atty), at<float>(a.att), at<T>(a.qkv), B, Tn, C, NH, ctx);
  else
    attention_forward<T>(at<T>(a.atty), at<char>(a.att), at<T>(a.qkv), at<char>(attn_scratch), B, Tn, C, NH, math,
                         ctx);
}

// dqkv (=) from dout = d atty.
template <class T>
void Gpt2Device::Impl::attention_bwd(T* dqkv, const T* dout, const LayerActs& a, int B, int Tn) {
  const int C = config.n_embd, NH = config.n_head;
  if (options.attention == Gpt2Attention::Flash)
    flash_attention_backward<T>(dqkv, dout, at<T>(a.qkv), at<T>(a.atty), at<float>(a.att), at<char>(attn_scratch), B,
                                Tn, C, NH, ctx);
  else
    attention_backward<T>(dqkv, dout, at<T>(a.qkv), at<char>(a.att), at<char>(attn_scratch), B, Tn, C, NH, math, ctx);
}

// The forward of model/gpt2.cpp (forward_impl) on the device, up to the logits; the batch is
// already uploaded.
template <class T>
void Gpt2Device::Impl::forward(int B, int Tn) {
  const int N = B * Tn, C = config.n_embd, L = config.n_layer;
  const int Vp = config.padded_vocab_size;
  const size_t NC = static_cast<size_t>(N) * C;
  const float eps = config.ln_eps;
  constexpr StorageType ts = storage_of<T>();
  const Gpt2TensorsOf<T> w = bind_gpt2_tensors<T>(table, param_copy<T>(), L);
  T* proj_out = at<T>(proj);

  // Encoder, then per layer ln1 → qkv → attention → c_proj → residual + ln2 → c_fc + GELU →
  // c_proj → residual + the next LayerNorm (ln1 of l+1, or ln_f).
  encoder_forward<T>(at<T>(encoded), tokens_dev(), w.wte, w.wpe, B, Tn, C, ctx);
  if (L > 0) {
    const LayerActs& a0 = layers[0];
    layernorm_forward<T>(at<T>(a0.ln1), at<float>(a0.ln1_mean), at<float>(a0.ln1_rstd), at<T>(encoded),
                         w.layers[0].ln1_w, w.layers[0].ln1_b, N, C, eps, ctx);
  } else {
    layernorm_forward<T>(at<T>(lnf), at<float>(lnf_mean), at<float>(lnf_rstd), at<T>(encoded), w.lnf_w, w.lnf_b, N,
                         C, eps, ctx);
  }
  for (int l = 0; l < L; ++l) {
    const Gpt2LayerTensorsOf<T>& wl = w.layers[l];
    const LayerActs& a = layers[l];
    const T* residual = l == 0 ? at<T>(encoded) : at<T>(layers[l - 1].residual3);
    matmul_forward<T>(at<T>(a.qkv), at<T>(a.ln1), wl.qkv_w, wl.qkv_b, N, C, 3 * C, math, ctx);
    attention_fwd<T>(a, B, Tn);
    matmul_forward<T>(proj_out, at<T>(a.atty), wl.attproj_w, wl.attproj_b, N, C, C, math, ctx);
    residual_layernorm<T>(at<T>(a.residual2), at<T>(a.ln2), at<float>(a.ln2_mean), at<float>(a.ln2_rstd), residual,
                          proj_out, wl.ln2_w, wl.ln2_b, N);
    if (fuse_gelu<T>()) {
      matmul_forward<T>(at<T>(a.fch_gelu), at<T>(a.ln2), wl.fc_w, wl.fc_b, N, C, 4 * C, math, ctx, at<T>(a.fch));
    } else {
      matmul_forward<T>(at<T>(a.fch), at<T>(a.ln2), wl.fc_w, wl.fc_b, N, C, 4 * C, math, ctx);
      gelu_forward<T>(at<T>(a.fch_gelu), at<T>(a.fch), 4 * NC, ctx);
    }
    matmul_forward<T>(proj_out, at<T>(a.fch_gelu), wl.fcproj_w, wl.fcproj_b, N, 4 * C, C, math, ctx);
    if (l + 1 < L) {
      const LayerActs& an = layers[l + 1];
      residual_layernorm<T>(at<T>(a.residual3), at<T>(an.ln1), at<float>(an.ln1_mean), at<float>(an.ln1_rstd),
                            at<T>(a.residual2), proj_out, w.layers[l + 1].ln1_w, w.layers[l + 1].ln1_b, N);
    } else {
      residual_layernorm<T>(at<T>(a.residual3), at<T>(lnf), at<float>(lnf_mean), at<float>(lnf_rstd),
                            at<T>(a.residual2), proj_out, w.lnf_w, w.lnf_b, N);
    }
  }
  // LM head tied to wte: logits[N,Vp] = lnf[N,C] · wte[Vp,C]^T.
  gemm(at<T>(logits), ts, at<T>(lnf), w.wte, ts, N, Vp, C, false, true, false, math, GemmEpilogue{}, ctx);
}

// The loss of model/gpt2.cpp (loss_impl): per-token losses (fp32) and dlogits in place, dloss
// (already uploaded) per token. Sampled: the labels are drawn into the targets region, from
// where run_step downloads them (the backward does not read targets).
template <class T>
void Gpt2Device::Impl::loss(int N, LossKind kind, uint64_t seed, uint64_t counter) {
  const int V = config.vocab_size, Vp = config.padded_vocab_size;
  T* logit = at<T>(logits);
  if (kind == LossKind::Sampled) {
    crossentropy_sampled_forward_backward<T>(at<float>(losses), logit, targets_dev(N), logit, dloss_dev(N), N, V, Vp,
                                             seed, counter, ctx);
  } else if (options.fused) {
    crossentropy_forward_backward<T>(at<float>(losses), logit, logit, targets_dev(N), dloss_dev(N), N, V, Vp, ctx);
  } else {  // the unfused twin: probabilities stored, then read back
    softmax_forward<T>(at<float>(probs), logit, N, V, Vp, 1.0f, ctx);
    crossentropy_from_probs<T>(at<float>(losses), logit, at<float>(probs), targets_dev(N), dloss_dev(N), N, V, Vp,
                               ctx);
  }
}

template <class T>
void Gpt2Device::Impl::grads_ready(ParamRange r, bool accumulate) {
  if constexpr (!std::is_same_v<T, float>) {
    // 16-bit gradients to the fp32 buffer the optimizer reads (accumulating: through the fp32
    // scratch, then added).
    widen_grad_range<T>(static_cast<float*>(grads.get()), static_cast<float*>(grads_acc.get()),
                        static_cast<const T*>(grads_lp.get()), r.begin, r.end, accumulate, ctx);
  }
  if (cut_capture)
    cut_capture(r);  // capturing a graph: the hook is called when the segment is launched
  else if (grad_ready)
    grad_ready(r.begin, r.end);
}

// The backward of model/gpt2.cpp (backward_impl) from the dlogits the loss left in place. The
// gradients (=, or += into the fp32 buffer when accumulating) end in the fp32 gradient buffer,
// announced range by range (grads_ready) as soon as each is final.
template <class T>
void Gpt2Device::Impl::backward(int B, int Tn, bool accumulate) {
  const int N = B * Tn, C = config.n_embd, L = config.n_layer;
  const int Vp = config.padded_vocab_size;
  const size_t NC = static_cast<size_t>(N) * C;
  constexpr StorageType ts = storage_of<T>();
  constexpr bool is_float = std::is_same_v<T, float>;
  T* gbase = is_float ? static_cast<T*>(grads.get()) : static_cast<T*>(grads_lp.get());
  const Gpt2TensorsOf<T> w = bind_gpt2_tensors<T>(table, param_copy<T>(), L);
  const Gpt2TensorsOf<T> g = bind_gpt2_tensors<T>(table, gbase, L);
  float* ln_scr = at<float>(ln_scratch);
  const T* logit = at<T>(logits);  // dlogits, in place

  // Every gradient buffer is +=: start from zero (fp32 accumulating: from the micro-batches
  // before; 16-bit gradients are added to the fp32 buffer range by range in grads_ready).
  if (!(accumulate && is_float)) fill_bytes(gbase, 0, n * sizeof(T), ctx);
  T* dres = at<T>(dresidual);
  T* dl = at<T>(dln);
  // dlnf = dlogits · wte ;  dwte += dlogits^T · lnf
  gemm(dl, ts, logit, w.wte, ts, N, C, Vp, false, false, false, math, GemmEpilogue{}, ctx);
  gemm(g.wte, ts, logit, at<T>(lnf), ts, Vp, C, N, true, false, true, math, GemmEpilogue{}, ctx);
  const T* last_residual = L > 0 ? at<T>(layers[L - 1].residual3) : at<T>(encoded);
  fill_bytes(dres, 0, NC * sizeof(T), ctx);
  layernorm_backward<T>(dres, g.lnf_w, g.lnf_b, dl, last_residual, w.lnf_w, at<float>(lnf_mean),
                        at<float>(lnf_rstd), ln_scr, N, C, ctx);
  grads_ready<T>(lnf_range, accumulate);
  // dres holds the gradient of the current layer's output; each LayerNorm backward adds the
  // branch's contribution to it (the residual connection).
  for (int l = L - 1; l >= 0; --l) {
    const Gpt2LayerTensorsOf<T>& wl = w.layers[l];
    const Gpt2LayerTensorsOf<T>& gl = g.layers[l];
    const LayerActs& a = layers[l];
    const T* residual = l == 0 ? at<T>(encoded) : at<T>(layers[l - 1].residual3);
    T* dfc = at<T>(dfch);
    T* dq = at<T>(dqkv);
    T* da = at<T>(datty);
    // MLP: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
    if (fuse_gelu<T>()) {  // dfc (=) the gradient w.r.t. the pre-GELU activation
      matmul_backward<T>(dfc, gl.fcproj_w, gl.fcproj_b, dres, at<T>(a.fch_gelu), wl.fcproj_w, N, 4 * C, C, math, ctx,
                         at<T>(a.fch));
    } else {
      fill_bytes(dfc, 0, 4 * NC * sizeof(T), ctx);
      matmul_backward<T>(dfc, gl.fcproj_w, gl.fcproj_b, dres, at<T>(a.fch_gelu), wl.fcproj_w, N, 4 * C, C, math, ctx);
      gelu_backward<T>(dfc, at<T>(a.fch), dfc, 4 * NC, ctx);
    }
    fill_bytes(dl, 0, NC * sizeof(T), ctx);
    matmul_backward<T>(dl, gl.fc_w, gl.fc_b, dfc, at<T>(a.ln2), wl.fc_w, N, C, 4 * C, math, ctx);
    layernorm_backward<T>(dres, gl.ln2_w, gl.ln2_b, dl, at<T>(a.residual2), wl.ln2_w, at<float>(a.ln2_mean),
                          at<float>(a.ln2_rstd), ln_scr, N, C, ctx);
    // Attention: residual2 = residual + attproj(attention(qkv(ln1(residual))))
    fill_bytes(da, 0, NC * sizeof(T), ctx);
    matmul_backward<T>(da, gl.attproj_w, gl.attproj_b, dres, at<T>(a.atty), wl.attproj_w, N, C, C, math, ctx);
    attention_bwd<T>(dq, da, a, B, Tn);
    fill_bytes(dl, 0, NC * sizeof(T), ctx);
    matmul_backward<T>(dl, gl.qkv_w, gl.qkv_b, dq, at<T>(a.ln1), wl.qkv_w, N, C, 3 * C, math, ctx);
    layernorm_backward<T>(dres, gl.ln1_w, gl.ln1_b, dl, residual, wl.ln1_w, at<float>(a.ln1_mean),
                          at<float>(a.ln1_rstd), ln_scr, N, C, ctx);
    grads_ready<T>(layer_ranges[l], accumulate);
  }
  encoder_backward<T>(g.wte, g.wpe, dres, tokens_dev(), at<char>(enc_scratch), enc_scratch_bytes, B, Tn, C, ctx);
  grads_ready<T>(embed_range, accumulate);
}

float Gpt2Device::Impl::run_step(const int* tokens, const int* targets, int* sampled, int B, int Tn, float grad_scale,
                                 bool accumulate, LossKind kind, uint64_t seed, uint64_t counter) {
  MPT_CHECK(tokens != nullptr && (targets != nullptr || kind == LossKind::Sampled) &&
                (sampled != nullptr || kind == LossKind::Targets),
            "[gpt2-cuda] forward_backward needs tokens, and targets (or a buffer for the sampled labels)");
  MPT_CHECK(B > 0 && Tn > 0 && B <= plan_B && Tn <= plan_T,
            "[gpt2-cuda] batch " + std::to_string(B) + "x" + std::to_string(Tn) + " exceeds the planned " +
                std::to_string(plan_B) + "x" + std::to_string(plan_T));
  const int N = B * Tn;
  // The mean is over the targets != -1, or over every position for sampled labels (as on the CPU).
  int counted = N;
  if (kind == LossKind::Targets) {
    counted = 0;
    for (int i = 0; i < N; ++i) counted += targets[i] != -1;
  }
  const float d = counted > 0 ? grad_scale / static_cast<float>(counted) : 0.0f;
  // One upload: tokens | targets | dloss (the model's per-token loss weights, as loss_impl).
  staging.resize(3 * static_cast<size_t>(N));
  for (int i = 0; i < N; ++i) {
    staging[i] = tokens[i];
    staging[N + i] = targets ? targets[i] : -1;
    std::memcpy(&staging[2 * static_cast<size_t>(N) + i], &d, sizeof(float));
  }
  copy_to_device(tokens_dev(), staging.data(), staging.size() * sizeof(int32_t), ctx);
  // 16-bit accumulation casts each range through an fp32 scratch (allocated once, here: never
  // inside the enqueued step, which a CUDA graph may capture).
  if (lowp && accumulate && !grads_acc.get()) grads_acc = DeviceMemory(n * sizeof(float));
  enqueue_step(B, Tn, accumulate, kind, seed, counter);
  host_losses.resize(N);
  copy_to_host(host_losses.data(), at<float>(losses), N * sizeof(float), ctx);
  if (kind == LossKind::Sampled) copy_to_host(sampled, targets_dev(N), N * sizeof(int), ctx);
  double sum = 0.0;  // fixed order, as Gpt2::loss_impl
  for (int i = 0; i < N; ++i) sum += host_losses[i];
  return counted > 0 ? static_cast<float>(sum / counted) : 0.0f;
}

// gpt2_device_graphs.cpp enqueues the step's pieces for each storage type.
#define MPT_INSTANTIATE(T)                                                                       \
  template void Gpt2Device::Impl::forward<T>(int, int);                                         \
  template void Gpt2Device::Impl::loss<T>(int, LossKind, uint64_t, uint64_t);                   \
  template void Gpt2Device::Impl::backward<T>(int, int, bool);
MPT_INSTANTIATE(float)
MPT_INSTANTIATE(Bf16)
MPT_INSTANTIATE(Fp16)
#undef MPT_INSTANTIATE

const char* attention_name(Gpt2Attention a) { return a == Gpt2Attention::Flash ? "flash" : "naive"; }

namespace {
// The options as applied: flash attention only where its kernels take the shape and type.
Gpt2DeviceOptions applied_options(Gpt2DeviceOptions o, const Gpt2Config& c, StorageType t) {
  if (o.attention == Gpt2Attention::Flash && !flash_attention_supported(c.n_embd, c.n_head, t))
    o.attention = Gpt2Attention::Naive;
  return o;
}
}  // namespace

Gpt2Device::Gpt2Device(const Gpt2Config& config, Precision precision, int B, int T, Context& ctx,
                       const Gpt2DeviceOptions& options)
    : impl_(std::make_unique<Impl>(config, precision, B, T, ctx)) {
  MPT_CHECK(B > 0 && T > 0, "[gpt2-cuda] batch size and sequence length must be positive");
  MPT_CHECK(T <= config.block_size, "[gpt2-cuda] sequence length " + std::to_string(T) +
                                        " is longer than the model's context (" + std::to_string(config.block_size) +
                                        " positions)");
  if (needs_loss_scaler(precision)) impl_->scaler = std::make_unique<LossScaler>();
  impl_->options = applied_options(options, config, impl_->t);
  impl_->plan_buffers();
  impl_->plan_grad_ranges();
}

Gpt2Device::~Gpt2Device() = default;

const Gpt2Config& Gpt2Device::config() const { return impl_->config; }
Precision Gpt2Device::precision() const { return impl_->precision; }
const Gpt2DeviceOptions& Gpt2Device::options() const { return impl_->options; }
size_t Gpt2Device::captured_graphs() const { return impl_->step_graphs.size(); }
const ParamTable& Gpt2Device::table() const { return impl_->table; }
size_t Gpt2Device::num_params() const { return impl_->n; }
const LossScaler* Gpt2Device::loss_scaler() const { return impl_->active_scaler(); }

size_t Gpt2Device::device_bytes() const {
  const Impl& im = *impl_;
  return im.params.bytes() + im.grads.bytes() + im.params_lp.bytes() + im.grads_lp.bytes() + im.grads_acc.bytes() +
         im.acts.bytes() + (im.optimizer ? im.optimizer->device_bytes() : 0);
}

void Gpt2Device::upload_params(const float* host) {
  Impl& im = *impl_;
  copy_to_device(im.params.get(), host, im.n * sizeof(float), im.ctx);
  if (im.optimizer) im.optimizer->zero_state();
  if (im.t == StorageType::BF16)
    cast_f32_to_bf16(static_cast<Bf16*>(im.params_lp.get()), static_cast<const float*>(im.params.get()), im.n,
                     im.ctx.stream());
  else if (im.t == StorageType::F16)
    cast_f32_to_f16(static_cast<Fp16*>(im.params_lp.get()), static_cast<const float*>(im.params.get()), im.n,
                    im.ctx.stream());
  im.ctx.synchronize();
}

void Gpt2Device::download_params(float* host) { copy_to_host(host, impl_->params.get(), impl_->n * sizeof(float), impl_->ctx); }

void Gpt2Device::download_grads(float* host) { copy_to_host(host, impl_->grads.get(), impl_->n * sizeof(float), impl_->ctx); }

float Gpt2Device::forward_backward(const int* tokens, const int* targets, int B, int T) {
  const LossScaler* scaler = impl_->active_scaler();
  return forward_backward(tokens, targets, B, T, scaler ? scaler->scale() : 1.0f, false);
}

float Gpt2Device::forward_backward(const int* tokens, const int* targets, int B, int T, float grad_scale,
                                   bool accumulate) {
  return impl_->run_step(tokens, targets, nullptr, B, T, grad_scale, accumulate, LossKind::Targets, 0, 0);
}

float Gpt2Device::forward_backward_sampled(const int* tokens, int* sampled, int B, int T, float grad_scale,
                                           uint64_t seed, uint64_t counter) {
  return impl_->run_step(tokens, nullptr, sampled, B, T, grad_scale, false, LossKind::Sampled, seed, counter);
}

void Gpt2Device::set_grad_ready(GradReadyFn fn) { impl_->grad_ready = std::move(fn); }

}  // namespace mptrain::cuda
