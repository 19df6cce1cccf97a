// BERT on one GPU (bert_device.h): the arena plan, the constructor, parameter and gradient
// transfers, and the host side of a step (batch checks, the masked positions, one upload, one
// download of the per-row losses and arg-maxes, the CPU's stats). The passes themselves are in
// bert_device_pass.cpp.
#include "backend/cuda/bert_device.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cuda/attention.h"
#include "backend/cuda/bert_device_impl.h"
#include "backend/cuda/cast.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/dispatch.h"
#include "backend/cuda/embeddings.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/grad_ready.h"
#include "backend/cuda/layernorm.h"
#include "backend/ops/attention_masked.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace bert_device_detail {

namespace {
constexpr int kNsp = Bert::kNspClasses;
// The MLM head runs on the masked rows rounded up to this multiple (padding rows after them,
// outside the loss), as the CPU model does: the count changes every batch, and every new GEMM
// shape would plan (and cache) another cuBLASLt descriptor.
constexpr int kMlmRowMultiple = 64;

StorageType storage_for(Precision p) {
  return p == Precision::Bf16   ? StorageType::BF16
         : p == Precision::Fp16 ? StorageType::F16
                                : StorageType::F32;
}
}  // namespace

BatchLayout::BatchLayout(int PN, int PM, int PB) {
  size_t w = 0;
  auto take = [&](int count) {
    const size_t at = w;
    w += static_cast<size_t>(count);
    return at;
  };
  tokens = take(PN), types = take(PN), mask = take(PN);
  mlm_targets = take(PM), mlm_pos = take(PM), mlm_dloss = take(PM);
  cls_pos = take(PB), nsp_labels = take(PB), nsp_dloss = take(PB);
  words = w;
}

StatsLayout::StatsLayout(int PM, int PB) {
  mlm_losses = 0;
  nsp_losses = static_cast<size_t>(PM);
  mlm_best = nsp_losses + PB;
  nsp_best = mlm_best + PM;
  mlm_sampled = nsp_best + PB;
  nsp_sampled = mlm_sampled + PM;
  words = nsp_sampled + PB;
}

bool use_flash(const BertConfig& config, StorageType t, BertAttention attention) {
  return attention == BertAttention::Auto && flash_attention_supported(config.hidden, config.n_head, t);
}

int planned_predictions(int B, int T, int max_predictions) {
  const int BT = B * T;
  return max_predictions > 0 ? std::min(max_predictions, BT) : BT;
}

Plan bert_device_plan(const BertConfig& config, StorageType t, bool flash, int B, int T, int PM,
                      size_t encoder_scratch_bytes) {
  const size_t BT = static_cast<size_t>(B) * T, C = config.hidden, I = config.intermediate;
  const size_t Vp = config.padded_vocab_size, M = static_cast<size_t>(PM);
  const size_t es = storage_bytes(t), f = sizeof(float);
  const int NH = config.n_head;
  Plan p;
  Arena& a = p.arena;
  p.emb = a.add(BT * C * es);
  p.emb_ln = a.add(BT * C * es);
  p.emb_mean = a.add(BT * f);
  p.emb_rstd = a.add(BT * f);
  for (int l = 0; l < config.n_layer; ++l) {
    LayerSlots s{};
    s.qkv = a.add(BT * 3 * C * es);
    // flash saves lse [B,NH,T] (fp32) beside its output atty; the naive path saves P.
    s.att = a.add(flash ? flash_attention_saved_bytes(B, T, NH)
                        : attention_saved_bytes(B, T, config.hidden, NH, t));
    s.atty = a.add(BT * C * es);
    s.res1 = a.add(BT * C * es);
    s.ln1 = a.add(BT * C * es);
    s.ln1_mean = a.add(BT * f);
    s.ln1_rstd = a.add(BT * f);
    s.fch = a.add(BT * I * es);
    s.fch_gelu = a.add(BT * I * es);
    s.res2 = a.add(BT * C * es);
    s.ln2 = a.add(BT * C * es);  // the layer's output
    s.ln2_mean = a.add(BT * f);
    s.ln2_rstd = a.add(BT * f);
    p.layers.push_back(s);
  }
  p.cls_in = a.add(B * C * es);  // the [CLS] rows of the last layer's output
  p.pooled = a.add(B * C * es);
  p.nsp_logits = a.add(B * kNsp * es);  // dlogits in place (fused loss)
  p.mlm_in = a.add(M * C * es);         // the masked rows of the last layer's output
  p.mlm_t = a.add(M * C * es);
  p.mlm_tg = a.add(M * C * es);
  p.mlm_tl = a.add(M * C * es);
  p.mlm_mean = a.add(M * f);
  p.mlm_rstd = a.add(M * f);
  p.mlm_logits = a.add(M * Vp * es);  // dlogits in place (fused loss)
  p.inputs = a.add(BatchLayout(static_cast<int>(BT), PM, B).words * sizeof(int32_t));
  p.stats = a.add(StatsLayout(PM, B).words * sizeof(int32_t));
  p.proj = a.add(BT * C * es);
  p.dh = a.add(BT * C * es);
  p.dres = a.add(BT * C * es);
  p.dqkv = a.add(BT * 3 * C * es);
  p.datty = a.add(BT * C * es);
  p.dfch = a.add(BT * I * es);
  p.dpooled = a.add(B * C * es);
  p.dcls = a.add(B * C * es);
  p.dmlm_a = a.add(M * C * es);
  p.dmlm_b = a.add(M * C * es);
  p.attn_scratch = a.add(flash ? flash_attention_scratch_bytes(B, T, NH)
                               : attention_scratch_bytes(B, T, config.hidden, NH, t));
  const int rows = static_cast<int>(BT);  // LayerNorm backward runs on B·T rows, or the MLM head's <= B·T
  p.ln_scratch = a.add(std::max(layernorm_backward_scratch_floats(rows, config.hidden),
                                layernorm_backward_scratch_floats(PM, config.hidden)) *
                       f);
  p.enc_scratch_bytes = encoder_scratch_bytes;
  p.enc_scratch = a.add(encoder_scratch_bytes);
  p.ones = a.add(BT * es);  // linear_backward's bias-gradient operand, for up to B·T rows
  return p;
}

}  // namespace bert_device_detail

using namespace bert_device_detail;

size_t bert_device_arena_bytes(const BertConfig& config, Precision precision, BertAttention attention, int B,
                               int T, int max_predictions, size_t encoder_scratch_bytes) {
  const StorageType t = storage_for(precision);
  return bert_device_plan(config, t, use_flash(config, t, attention), B, T,
                          planned_predictions(B, T, max_predictions), encoder_scratch_bytes)
      .arena.size();
}

namespace {

// The parameter table, once the plan's sizes are known to be valid (the first member that
// depends on them).
ParamTable checked_table(const BertConfig& config, int B, int T, int max_predictions) {
  MPT_CHECK(B > 0 && T > 0, "[bert-cuda] batch size and sequence length must be positive (B=" +
                                std::to_string(B) + " T=" + std::to_string(T) + ")");
  MPT_CHECK(T <= config.max_position, "[bert-cuda] sequence length " + std::to_string(T) +
                                          " is longer than the BERT model's " +
                                          std::to_string(config.max_position) + " positions");
  MPT_CHECK(max_predictions >= 0,
            "[bert-cuda] max_predictions must be >= 0 (0 = B·T), got " + std::to_string(max_predictions));
  return bert_param_table(config);
}

// ones[n] in the storage type t, uploaded once (linear_backward's bias-gradient operand).
void upload_ones(void* dst, StorageType t, size_t n, Context& ctx) {
  dispatch_storage(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T one;
    if constexpr (std::is_same_v<T, float>)
      one = 1.0f;
    else if constexpr (std::is_same_v<T, Bf16>)
      one = f32_to_bf16(1.0f);
    else
      one = f32_to_f16(1.0f);
    const std::vector<T> host(n, one);
    copy_to_device(dst, host.data(), n * sizeof(T), ctx);
  });
}

}  // namespace

BertDevice::Impl::Impl(const BertConfig& c, Precision p, int B, int T, int max_predictions, Context& cx,
                       BertAttention a)
    : config(c),
      precision(p),
      t(storage_for(p)),
      math(p == Precision::Tf32 ? MathMode::Tf32 : MathMode::Fp32),
      lowp(storage_for(p) != StorageType::F32),
      flash(use_flash(c, storage_for(p), a)),
      ctx(cx),
      table(checked_table(c, B, T, max_predictions)),
      n(table.total()),
      plan_B(B),
      plan_T(T),
      plan_M(planned_predictions(B, T, max_predictions)),
      plan(bert_device_plan(c, t, flash, B, T, plan_M, embeddings_backward_scratch_bytes(B, T))),
      batch(B * T, plan_M, B),
      stats(plan_M, B) {
  const size_t f = sizeof(float), es = storage_bytes(t);
  params = DeviceMemory(n * f);
  grads = DeviceMemory(n * f);
  if (lowp) {
    params_lp = DeviceMemory(n * es);
    grads_lp = DeviceMemory(n * es);
    fill_bytes(params_lp.get(), 0, n * es, ctx);
  }
  acts = DeviceMemory(plan.arena.size());
  fill_bytes(params.get(), 0, n * f, ctx);
  fill_bytes(grads.get(), 0, n * f, ctx);
  upload_ones(at<char>(plan.ones), t, static_cast<size_t>(B) * T, ctx);
  const std::vector<std::pair<size_t, size_t>> r = BertDevice::grad_ready_ranges(c);
  head_range = r.front();
  layer_ranges.assign(r.rbegin() + 1, r.rend() - 1);  // layer_ranges[l]: layer l's range
  embed_range = r.back();
  ctx.synchronize();
}

// The gradient-ready ranges (bert_device.h) from bert_param_table's order: embeddings, layer
// 0 ... L-1, pooler, MLM transform, MLM bias, NSP. The heads are the table's tail, so one range;
// each layer is contiguous; the embeddings are the head of the table. Checked, not assumed.
std::vector<std::pair<size_t, size_t>> BertDevice::grad_ready_ranges(const BertConfig& config) {
  const ParamTable table = bert_param_table(config);
  const std::string who = "[bert-cuda]";
  std::vector<std::pair<size_t, size_t>> ranges{prefixed_range(table, {"bert.pooler.", "cls."}, who)};
  for (int l = config.n_layer - 1; l >= 0; --l)
    ranges.push_back(prefixed_range(table, {"bert.encoder.layer." + std::to_string(l) + "."}, who));
  ranges.push_back(prefixed_range(table, {"bert.embeddings."}, who));
  check_top_down_tiling(ranges, table.total(),
                        who + " the parameter table is not embeddings, layer 0 ... L-1, heads in order");
  return ranges;
}

void BertDevice::set_grad_ready(GradReadyFn fn) { impl_->grad_ready = std::move(fn); }

BertDevice::BertDevice(const BertConfig& config, Precision precision, int B, int T, int max_predictions,
                       Context& ctx, BertAttention attention)
    : impl_(std::make_unique<Impl>(config, precision, B, T, max_predictions, ctx, attention)) {}

BertDevice::~BertDevice() = default;

const BertConfig& BertDevice::config() const { return impl_->config; }
Precision BertDevice::precision() const { return impl_->precision; }
const ParamTable& BertDevice::table() const { return impl_->table; }
size_t BertDevice::num_params() const { return impl_->n; }
bool BertDevice::uses_flash_attention() const { return impl_->flash; }
float* BertDevice::params_device() { return static_cast<float*>(impl_->params.get()); }
float* BertDevice::grads_device() { return static_cast<float*>(impl_->grads.get()); }
void* BertDevice::params_lowp_device() { return impl_->params_lp.get(); }
StorageType BertDevice::storage() const { return impl_->t; }

size_t BertDevice::device_bytes() const {
  const Impl& im = *impl_;
  return im.params.bytes() + im.grads.bytes() + im.params_lp.bytes() + im.grads_lp.bytes() +
         im.grads_acc.bytes() + im.acts.bytes();
}

void BertDevice::upload_params(const float* host) {
  Impl& im = *impl_;
  copy_to_device(im.params.get(), host, im.n * sizeof(float), im.ctx);
  const float* src = static_cast<const float*>(im.params.get());
  if (im.t == StorageType::BF16)
    cast_f32_to_bf16(static_cast<Bf16*>(im.params_lp.get()), src, im.n, im.ctx.stream());
  else if (im.t == StorageType::F16)
    cast_f32_to_f16(static_cast<Fp16*>(im.params_lp.get()), src, im.n, im.ctx.stream());
  im.ctx.synchronize();
}

void BertDevice::download_params(float* host) {
  copy_to_host(host, impl_->params.get(), impl_->n * sizeof(float), impl_->ctx);
}

void BertDevice::download_grads(float* host) {
  copy_to_host(host, impl_->grads.get(), impl_->n * sizeof(float), impl_->ctx);
}

BertStats BertDevice::forward_backward(const BertInputs& batch, int B, int T, float grad_scale,
                                       bool accumulate) {
  return run(batch, B, T, grad_scale, Pass::Train, accumulate);
}

BertStats BertDevice::evaluate(const BertInputs& batch, int B, int T) {
  return run(batch, B, T, 1.0f, Pass::Evaluate, false);
}

namespace {

void put_float(int32_t* word, float x) { std::memcpy(word, &x, sizeof(float)); }
float get_float(const int32_t* word) {
  float x;
  std::memcpy(&x, word, sizeof(float));
  return x;
}

}  // namespace

namespace bert_device_detail {

StepShape stage_batch(const BatchLayout& L, int plan_M, const BertInputs& b, int B, int T, float grad_scale,
                      std::vector<int32_t>& w, std::vector<int>& mlm_targets) {
  StepShape s;
  s.B = B, s.Tn = T, s.N = B * T;
  s.nsp = b.nsp_labels != nullptr;
  s.masked = b.attention_mask != nullptr;
  w.assign(L.words, 0);
  mlm_targets.clear();
  for (int i = 0; i < s.N; ++i) {
    w[L.tokens + i] = b.tokens[i];
    w[L.types + i] = b.token_types ? b.token_types[i] : 0;
    w[L.mask + i] = b.attention_mask ? b.attention_mask[i] : 1;
    if (b.mlm_labels && b.mlm_labels[i] != -1) {
      MPT_CHECK(s.M < plan_M,
                "[bert-cuda] the batch has more masked positions than the planned " + std::to_string(plan_M));
      w[L.mlm_pos + s.M] = i;
      w[L.mlm_targets + s.M] = b.mlm_labels[i];
      mlm_targets.push_back(b.mlm_labels[i]);
      ++s.M;
    }
  }
  s.Mr = s.M == 0 ? 0 : std::min(plan_M, (s.M + kMlmRowMultiple - 1) / kMlmRowMultiple * kMlmRowMultiple);
  for (int r = s.M; r < s.Mr; ++r) w[L.mlm_targets + r] = -1;  // padding rows: no loss, no gradient
  for (int r = 0; r < s.M; ++r) put_float(&w[L.mlm_dloss + r], grad_scale / static_cast<float>(s.M));
  for (int i = 0; i < B; ++i) {
    w[L.cls_pos + i] = i * T;
    if (s.nsp) {
      w[L.nsp_labels + i] = b.nsp_labels[i];
      put_float(&w[L.nsp_dloss + i], grad_scale / static_cast<float>(B));
    }
  }
  return s;
}

BertStats collect_stats(const StatsLayout& O, const StepShape& s, const std::vector<int32_t>& h,
                        const int* mlm_labels, const int* nsp_labels) {
  BertStats st;
  if (s.M > 0) {
    double sum = 0.0;  // fixed order: the CPU's loss_impl
    for (int r = 0; r < s.M; ++r) {
      sum += get_float(&h[O.mlm_losses + r]);
      st.mlm_correct += h[O.mlm_best + r] == mlm_labels[r];
    }
    st.mlm_loss = static_cast<float>(sum / s.M);
    st.mlm_count = s.M;
  }
  if (s.nsp) {
    double sum = 0.0;
    for (int i = 0; i < s.B; ++i) {
      sum += get_float(&h[O.nsp_losses + i]);
      st.nsp_correct += h[O.nsp_best + i] == nsp_labels[i];
    }
    st.nsp_loss = static_cast<float>(sum / s.B);
    st.nsp_count = s.B;
  }
  return st;
}

}  // namespace bert_device_detail

BertStats BertDevice::forward_backward_sampled(const BertInputs& batch, int B, int T, float grad_scale,
                                               uint64_t seed, uint64_t counter) {
  return run(batch, B, T, grad_scale, Pass::Sampled, false, seed, counter);
}

const std::vector<int>& BertDevice::sampled_mlm_labels() const { return impl_->sampled_mlm; }
const std::vector<int>& BertDevice::sampled_nsp_labels() const { return impl_->sampled_nsp; }

BertStats BertDevice::run(const BertInputs& b, int B, int T, float grad_scale, Pass pass, bool accumulate,
                          uint64_t seed, uint64_t counter) {
  Impl& im = *impl_;
  MPT_CHECK(B > 0 && T > 0, "[bert-cuda] batch size and sequence length must be positive (B=" +
                                std::to_string(B) + " T=" + std::to_string(T) + ")");
  validate_bert_batch(im.config, b, B, T, im.plan_B, im.plan_T);
  cpu::check_key_mask("bert-cuda", b.attention_mask, B, T);
  StepShape s = stage_batch(im.batch, im.plan_M, b, B, T, grad_scale, im.staging, im.mlm_targets);
  s.backward = pass != Pass::Evaluate;
  s.sampled = pass == Pass::Sampled;
  s.seed = seed, s.counter = counter;
  copy_to_device(im.at<char>(im.plan.inputs), im.staging.data(), im.staging.size() * sizeof(int32_t), im.ctx);
  dispatch_storage(im.t, [&](auto tag) {
    using T_ = typename decltype(tag)::type;
    im.forward<T_>(s);
    im.losses<T_>(s);
    if (s.backward) im.backward<T_>(s, accumulate);
  });
  // One download of the per-row losses, arg-maxes and drawn labels.
  const StatsLayout& O = im.stats;
  im.host_stats.resize(O.words);
  copy_to_host(im.host_stats.data(), im.at<char>(im.plan.stats), O.words * sizeof(int32_t), im.ctx);
  if (!s.sampled) return collect_stats(O, s, im.host_stats, im.mlm_targets.data(), b.nsp_labels);
  const int32_t* h = im.host_stats.data();
  im.sampled_mlm.assign(h + O.mlm_sampled, h + O.mlm_sampled + s.M);
  im.sampled_nsp.assign(h + O.nsp_sampled, h + O.nsp_sampled + (s.nsp ? B : 0));
  return collect_stats(O, s, im.host_stats, im.sampled_mlm.data(), im.sampled_nsp.data());
}

}  // namespace mptrain::cuda
