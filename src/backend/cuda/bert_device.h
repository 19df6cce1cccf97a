// BERT (model/bert.h: post-LN encoder, key-padding-masked bidirectional attention, MLM head on
// the masked positions only, NSP head behind a tanh pooler) on one GPU, the model half of a
// training step: every buffer allocated once, at construction, for a planned B×T and a maximum
// number of masked positions; forward, the two fused losses and backward through the CUDA
// launchers; fp32 gradients out. No optimizer here: the device optimizer
// (backend/cuda/device_optimizer.h) updates params_device() from grads_device().
//
// Precision mapping (as Gpt2Device, gpt2_device.h; docs/dev/cuda.md): one storage type T for
// every activation and for the parameter copy the forward reads:
//   fp32 -> T = float, MathMode::Fp32 (no tensor cores);  tf32 -> float, MathMode::Tf32
//   bf16 -> T = Bf16;  fp16 -> T = Fp16 (loss scaling is the caller's: pass grad_scale)
// Master parameters and the gradients handed out are fp32 in every mode; 16-bit T writes the
// gradients in T (llm.c's scheme) and casts each range of the table to fp32 as soon as the
// backward has finished it (so that a data-parallel reduction can start on it: set_grad_ready).
// Deviations from the CPU mixed policy (precision/policy.h, model/bert_pass.cpp), 16-bit only:
// the residual stream (the LayerNorm outputs, BERT being post-LN) and its gradient, the MLM and
// NSP logits and their gradients are stored in T (the CPU keeps them fp32); the MLM transform's
// LayerNorm reads its T input directly (the CPU widens it); parameter gradients are rounded to T
// once. Attention: the naive key-masked path (attention.h) for fp32/tf32 and for head sizes
// the fused kernels do not take; flash (flash_attention.h, masked) for bf16/fp16 with HS 64/128,
// unless BertAttention::Naive asks for the naive one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "backend/cuda/context.h"
#include "core/dtype.h"
#include "core/param_table.h"
#include "model/bert.h"
#include "model/bert_config.h"
#include "precision/precision.h"

namespace mptrain::cuda {

enum class BertAttention {
  Auto,   // flash where it applies (16-bit T, HS 64 or 128), else naive
  Naive,  // always the naive key-masked path (the reference, and the ladder's "before" row)
};

// Bytes of BertDevice's activation arena (saved activations, scratch, the batch, the losses)
// for this plan, given encoder.h's sort scratch (which only a GPU can size): a pure host
// computation, so tests check it without a GPU. max_predictions 0 = B·T.
size_t bert_device_arena_bytes(const BertConfig& config, Precision precision, BertAttention attention, int B,
                               int T, int max_predictions, size_t encoder_scratch_bytes);

class BertDevice {
 public:
  // Allocates every device buffer for micro-batches of up to B×T tokens (T <= max_position) with
  // at most max_predictions masked positions in all (0 = B·T, as Bert::plan). Parameters start
  // as zeros: upload_params before a step. Throws Error on bad sizes, LibraryError when the
  // device is out of memory.
  BertDevice(const BertConfig& config, Precision precision, int B, int T, int max_predictions, Context& ctx,
             BertAttention attention = BertAttention::Auto);
  ~BertDevice();
  BertDevice(const BertDevice&) = delete;
  BertDevice& operator=(const BertDevice&) = delete;

  const BertConfig& config() const;
  Precision precision() const;
  const ParamTable& table() const;  // bert_param_table(config): the layout of every flat buffer
  size_t num_params() const;
  size_t device_bytes() const;  // everything this object allocated on the device
  bool uses_flash_attention() const;

  // host[num_params()] in the table's layout (Bert::params() as is); writes the 16-bit copy
  // too. Synchronous.
  void upload_params(const float* host);
  void download_params(float* host);  // the fp32 masters; synchronous
  void download_grads(float* host);   // the fp32 gradients; synchronous

  // Bert::forward_backward on the device: the batch (host arrays, model/bert.h's conventions,
  // checked as the CPU model checks them) is uploaded, then forward, the MLM and NSP losses
  // and backward; the fp32 gradients of grad_scale · (mean MLM loss + mean NSP loss) are
  // ADDED (+=) to grads_device() when accumulate, else written (=). Returns the CPU's stats
  // (means, counts, arg-max hits). Host syncs: the batch upload, the stats download.
  BertStats forward_backward(const BertInputs& batch, int B, int T, float grad_scale, bool accumulate);
  // Forward and losses only (validation); gradients untouched.
  BertStats evaluate(const BertInputs& batch, int B, int T);
  // Sophia-G's Gauss-Newton-Bartlett pass, Bert::forward_backward_sampled's contract except that
  // the gradients are WRITTEN (=, the curvature estimate's own buffer contents): the MLM labels
  // at the masked positions (batch.mlm_labels != -1; their values are not read) and, when
  // batch.nsp_labels is set, the NSP labels are drawn from the model's softmax inside the fused
  // loss (crossentropy.h's sampled variant: MLM rows from (seed, counter), NSP rows from
  // (seed ^ Bert::kNspSeedSalt, counter), the CPU's uniforms, so the labels equal the CPU's but
  // where a uniform lies within fp32 rounding of a CDF boundary). Stats are against the drawn
  // labels, which sampled_mlm_labels() (masked positions in (b, t) order) and
  // sampled_nsp_labels() [B] return afterwards.
  BertStats forward_backward_sampled(const BertInputs& batch, int B, int T, float grad_scale, uint64_t seed,
                                     uint64_t counter);
  const std::vector<int>& sampled_mlm_labels() const;
  const std::vector<int>& sampled_nsp_labels() const;

  // The device buffers a device optimizer works on (num_params() elements, the table's layout):
  // fp32 masters and gradients; the 16-bit copy the forward reads (null for fp32/tf32), which
  // the optimizer refreshes after each update (AdamW's optional bf16/fp16 copy).
  float* params_device();
  float* grads_device();
  void* params_lowp_device();
  StorageType storage() const;  // T

  // --- data-parallel overlap: the gradient-ready hook (Gpt2Device's contract) ---
  // While set (null = none), every forward_backward / forward_backward_sampled call invokes
  // fn(begin, end) on the host, in this order: the heads' range (pooler, MLM transform and
  // bias, NSP: the table's tail, final once the MLM and NSP heads' backward ran), then each encoder
  // layer's contiguous range (layer L-1 down to 0), then [0, start of layer 0) = the
  // embeddings and their LayerNorm. The word embeddings belong to the last range: the tied MLM
  // decoder adds to their gradient first in the backward, the embedding backward last. The
  // ranges are disjoint and cover [0, num_params()) exactly once per call, with or without
  // accumulate. Each call comes right after the work that makes the fp32 gradients
  // [begin, end) final has been ENQUEUED on ctx.stream() (16-bit modes: including their cast
  // to fp32 and, accumulating, the add): the consumer records an event on ctx.stream() and
  // orders its own work after it, and must not read the gradients on the host in the hook.
  // Nothing in the rest of the call writes a range after it was announced. evaluate() has no
  // backward and calls nothing. The stepper sets the hook for the last micro-batch only.
  using GradReadyFn = std::function<void(size_t begin, size_t end)>;
  void set_grad_ready(GradReadyFn fn);
  // The ranges the hook is called with, in its order, for `config`'s table (no GPU needed).
  static std::vector<std::pair<size_t, size_t>> grad_ready_ranges(const BertConfig& config);

  struct Impl;

 private:
  enum class Pass { Evaluate, Train, Sampled };
  BertStats run(const BertInputs& batch, int B, int T, float grad_scale, Pass pass, bool accumulate,
                uint64_t seed = 0, uint64_t counter = 0);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mptrain::cuda
