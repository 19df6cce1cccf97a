// The private state of cuda::BertDevice (bert_device.h), shared by the files that implement
// it: bert_device.cpp (the buffer plan, uploads, the batch and the stats) and
// bert_device_pass.cpp (forward, losses and backward). Not for other code: include
// bert_device.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/cuda/arena.h"
#include "backend/cuda/bert_device.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gemm.h"

namespace mptrain::cuda {

namespace bert_device_detail {

// Byte offsets (into the activation arena) of one encoder layer's saved activations.
struct LayerSlots {
  size_t qkv, att, atty, res1, ln1, ln1_mean, ln1_rstd, fch, fch_gelu, res2, ln2, ln2_mean, ln2_rstd;
};

// The batch region: 4-byte words at offsets fixed by the plan (PN = planned B·T, PM = planned
// masked positions, PB = planned B), so one upload carries a whole batch:
//   tokens[PN] | types[PN] | key mask[PN] | mlm targets[PM] (-1 after the M masked rows) |
//   mlm positions[PM] | mlm dloss[PM] | cls positions[PB] | nsp labels[PB] | nsp dloss[PB]
struct BatchLayout {
  size_t tokens, types, mask, mlm_targets, mlm_pos, mlm_dloss, cls_pos, nsp_labels, nsp_dloss, words;
  BatchLayout(int PN, int PM, int PB);
};

// The stats region, one download per step: mlm losses[PM] | nsp losses[PB] (fp32) |
// mlm arg-max[PM] | nsp arg-max[PB] | drawn mlm labels[PM] | drawn nsp labels[PB] (ints; the
// last two written by the sampled pass only).
struct StatsLayout {
  size_t mlm_losses, nsp_losses, mlm_best, nsp_best, mlm_sampled, nsp_sampled, words;
  StatsLayout(int PM, int PB);
};

// Every region of the activation arena (byte offsets), from bert_device_plan.
struct Plan {
  Arena arena;
  size_t emb = 0, emb_ln = 0, emb_mean = 0, emb_rstd = 0;
  std::vector<LayerSlots> layers;
  size_t cls_in = 0, pooled = 0, nsp_logits = 0;
  size_t mlm_in = 0, mlm_t = 0, mlm_tg = 0, mlm_tl = 0, mlm_mean = 0, mlm_rstd = 0, mlm_logits = 0;
  size_t inputs = 0, stats = 0;
  // Scratch shared by every layer (not saved for backward).
  size_t proj = 0, dh = 0, dres = 0, dqkv = 0, datty = 0, dfch = 0, dpooled = 0, dcls = 0, dmlm_a = 0,
         dmlm_b = 0;
  size_t attn_scratch = 0, ln_scratch = 0, enc_scratch = 0, ones = 0;
  size_t enc_scratch_bytes = 0;
};

// The arena plan of a B×T micro-batch with PM masked positions at most (PM in [1, B·T]).
Plan bert_device_plan(const BertConfig& config, StorageType t, bool flash, int B, int T, int PM,
                      size_t encoder_scratch_bytes);

// Whether the fused attention kernels run this configuration.
bool use_flash(const BertConfig& config, StorageType t, BertAttention attention);

// The planned maximum of masked positions: max_predictions, capped at (and 0 meaning) B·T.
int planned_predictions(int B, int T, int max_predictions);

// The shape of one step, from the batch (host).
struct StepShape {
  int B = 0, Tn = 0, N = 0;
  int M = 0;            // masked positions (MLM loss rows)
  int Mr = 0;           // rows the MLM head runs on: M rounded up (bert_device.cpp), padding rows after
  bool nsp = false;     // the batch has NSP labels: NSP loss, pooler and NSP backward
  bool masked = false;  // the batch has an attention mask (else no key is padding)
  bool backward = false;
  bool sampled = false;  // Sophia's pass: labels drawn from the model (seed, counter)
  uint64_t seed = 0, counter = 0;
};

// The host half of a step, without a GPU (tested alone): stage_batch fills the batch words
// (BatchLayout) from host arrays already validated, with the masked positions in row-major
// (b, t) order (the CPU's collect_masked), their labels in mlm_targets, M rounded up to Mr, the
// [CLS] rows and the loss weights grad_scale/M and grad_scale/B, and returns the step's shape
// (backward left false). Throws Error when there are more masked positions than plan_M.
// collect_stats turns the downloaded stats words into the CPU's BertStats, the arg-max hits
// counted against mlm_labels[M] and nsp_labels[B] (the batch's, or the drawn ones).
StepShape stage_batch(const BatchLayout& layout, int plan_M, const BertInputs& batch, int B, int T,
                      float grad_scale, std::vector<int32_t>& words, std::vector<int>& mlm_targets);
BertStats collect_stats(const StatsLayout& layout, const StepShape& shape, const std::vector<int32_t>& words,
                        const int* mlm_labels, const int* nsp_labels);

}  // namespace bert_device_detail

struct BertDevice::Impl {
  BertConfig config;
  Precision precision;
  StorageType t;  // activations and the parameter copy the forward reads
  MathMode math;  // Fp32 or Tf32 when t is F32; ignored by 16-bit products
  bool lowp;      // t != F32: a 16-bit parameter copy and 16-bit gradients exist
  bool flash;     // the fused attention kernels (else the naive path)
  Context& ctx;
  ParamTable table;
  size_t n = 0;
  int plan_B = 0, plan_T = 0, plan_M = 0;
  bert_device_detail::Plan plan;
  bert_device_detail::BatchLayout batch;
  bert_device_detail::StatsLayout stats;

  // One allocation per role: fp32 masters and gradients; the 16-bit parameter copy and
  // gradients (lowp only); 16-bit accumulation's fp32 scratch (first accumulating call);
  // the activation arena.
  DeviceMemory params, grads, params_lp, grads_lp, grads_acc, acts;
  // Host staging: the batch words (one upload) and the stats words (one download).
  std::vector<int32_t> staging, host_stats;
  std::vector<int> mlm_targets;               // the masked positions' labels, for the accuracy
  std::vector<int> sampled_mlm, sampled_nsp;  // the last sampled pass's labels
  // The gradient-ready hook (bert_device.h) and its ranges in backward order: heads, layer
  // L-1 ... 0 (layer_ranges[l]), embeddings.
  GradReadyFn grad_ready;
  std::pair<size_t, size_t> head_range, embed_range;
  std::vector<std::pair<size_t, size_t>> layer_ranges;

  Impl(const BertConfig& c, Precision p, int B, int T, int max_predictions, Context& cx, BertAttention a);

  template <class U>
  U* at(size_t offset) const {
    return reinterpret_cast<U*>(static_cast<char*>(acts.get()) + offset);
  }
  template <class U>
  U* in(size_t word) const {  // a word offset into the batch region
    return reinterpret_cast<U*>(at<int32_t>(plan.inputs) + word);
  }
  template <class U>
  U* out(size_t word) const {  // a word offset into the stats region
    return reinterpret_cast<U*>(at<int32_t>(plan.stats) + word);
  }

  // bert_device_pass.cpp
  template <class T>
  void forward(const bert_device_detail::StepShape& s);
  template <class T>
  void losses(const bert_device_detail::StepShape& s);
  template <class T>
  void backward(const bert_device_detail::StepShape& s, bool accumulate);
  // [r.first, r.second)'s gradients are final on the stream (16-bit: cast to fp32 here, added
  // when accumulating): announce them to the hook.
  template <class T>
  void grads_ready(std::pair<size_t, size_t> r, bool accumulate);
};

}  // namespace mptrain::cuda
