// GPT-2 training on one GPU: every buffer of a step on the device (allocated once, at
// construction, for a planned B×T), the forward and backward of model/gpt2.cpp through the
// CUDA launchers, and the optimizer step (grad_norm + clip factor + one AdamW launch, fp16 loss
// scaling) without leaving the device. The host only uploads a batch and reads the loss.
//
// Precision mapping (docs/dev/cuda.md, "GPT-2 on the device"): one storage type T for every
// activation and for the parameter copy the forward reads:
//   fp32 -> T = float, MathMode::Fp32 (no tensor cores)
//   tf32 -> T = float, MathMode::Tf32
//   bf16 -> T = Bf16 (activations, logits, residual stream, parameter copy, gradients)
//   fp16 -> T = Fp16, as bf16, plus dynamic loss scaling (precision/loss_scaler.h's GradScaler)
// Master parameters, AdamW moments and the gradients the optimizer reads are fp32 in every mode.
// For 16-bit T the launchers' one-T-per-op contract means the backward writes gradients in T
// (llm.c's scheme); each layer's range is cast to the fp32 gradient buffer right after that
// layer's backward (so that a data-parallel all-reduce can start on it: set_grad_ready).
// Deviations from the CPU mixed policy (precision/policy.h): the residual stream, its gradient,
// the logits and dlogits are stored in T (the CPU keeps them fp32); gradients are rounded to T
// once before the fp32 optimizer. Gradient accumulation over micro-batches: the 6-argument
// forward_backward (16-bit T: each micro-batch's gradients are cast and added in fp32).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/device_optimizer.h"
#include "core/param_table.h"
#include "model/gpt2_config.h"
#include "optim/adamw.h"
#include "precision/loss_scaler.h"
#include "precision/precision.h"

namespace mptrain::cuda {

// Which attention the step runs: naive (attention.h: materialised T×T scores, every precision)
// or flash (flash_attention.h: fused, 16-bit T and head size 64 or 128 only).
enum class Gpt2Attention { Naive, Flash };
const char* attention_name(Gpt2Attention a);  // "naive" | "flash"

// How a step is computed: the rungs of `mptrain bench --device cuda --ladder` as data. Every
// combination gives the same training (tests/cuda/test_gpt2_device_gpu.cpp checks each against
// the CPU model); only speed and memory differ. The default is the fastest measured setting.
struct Gpt2DeviceOptions {
  // Flash where flash_attention_supported(C, NH, T) holds; elsewhere (fp32/TF32, other head
  // sizes) the naive path runs instead: Gpt2Device::options().attention says which one did.
  // Flash saves out + lse per layer instead of the naive path's probabilities [B,NH,T,T].
  Gpt2Attention attention = Gpt2Attention::Flash;
  // true: residual add + LayerNorm in one kernel, the fused softmax-cross-entropy, and (16-bit
  // T only: slower in fp32/TF32, measured) the bias+GELU GEMM epilogue. false: their unfused
  // twins, residual_forward + layernorm_forward, softmax_forward + crossentropy_from_probs
  // (through an fp32 [B·T, Vp] probability buffer, planned only then) and GEMM + gelu_forward.
  // Sophia's sampled loss has no unfused twin: forward_backward_sampled always fuses it.
  bool fused = true;
  // Replay each step as CUDA graphs (gpt2_device_graphs.cpp): off until run on a GPU.
  bool graphs = false;
};

class Gpt2Device {
 public:
  // Allocates every device buffer for micro-batches of up to B×T tokens (T <= block_size).
  // Parameters start as zeros: upload_params before training. Throws Error on bad sizes and
  // LibraryError when the device is out of memory. `options` picks the kernels (above).
  Gpt2Device(const Gpt2Config& config, Precision precision, int B, int T, Context& ctx,
             const Gpt2DeviceOptions& options = {});
  ~Gpt2Device();
  Gpt2Device(const Gpt2Device&) = delete;
  Gpt2Device& operator=(const Gpt2Device&) = delete;

  const Gpt2Config& config() const;
  Precision precision() const;
  const Gpt2DeviceOptions& options() const;  // as applied: attention is what runs
  // Steps captured as CUDA graphs so far (options.graphs: one per (B, T, accumulate) after its
  // eager first call; a recapture replaces one). For tests and the bench's report.
  size_t captured_graphs() const;
  const ParamTable& table() const;  // gpt2_param_table(config): the layout of every flat buffer
  size_t num_params() const;
  size_t device_bytes() const;  // everything this object allocated on the device

  // host[num_params()] in the table's layout (e.g. Gpt2::params() after init_weights). Also
  // zeroes the moments of step()'s AdamW and writes the low-precision copy. Synchronous.
  void upload_params(const float* host);
  void download_params(float* host);  // the fp32 masters; synchronous
  // The fp32 gradients of the last forward_backward (before clipping; multiplied by the loss
  // scale under fp16 until step() unscales them). Synchronous.
  void download_grads(float* host);

  // tokens[B*T] (ids < V) and targets[B*T] (< V, or -1 = ignored), host arrays. Forward,
  // fused loss, backward; the gradients (=, not accumulated) of the mean loss over targets !=
  // -1 (times the loss scale under fp16) end in the fp32 gradient buffer. Returns that mean
  // loss (host syncs: the input upload, the loss download).
  float forward_backward(const int* tokens, const int* targets, int B, int T);

  // One optimizer step on the last gradients, as train/step.cpp does on the CPU: fp16 unscale
  // and inf/NaN check (GradScaler: a non-finite step leaves parameters and moments untouched
  // and halves the scale), global norm, clip factor min(1, grad_clip / (norm + 1e-6)) (none
  // when grad_clip <= 0), AdamW with weight decay where the table says `decay`, and the
  // refreshed low-precision copy. t: the 1-based optimizer step. Returns false when the step
  // was skipped (fp16 only). No host sync except fp16's one read of the overflow flag.
  bool step(float lr, const AdamWHyper& hyper, float grad_clip, int64_t t);

  // The gradient norm of the last step (before clipping; synchronous).
  double last_grad_norm();

  // --- the training loop's step (train/device_step.h) ---
  // forward_backward with StepModel::micro_step's contract (train/step.h): the gradients of
  // grad_scale · the mean loss, ADDED (+=) to the fp32 gradient buffer when accumulate, else
  // written (=). grad_scale = loss_scale / accum; the scaler is not read here.
  float forward_backward(const int* tokens, const int* targets, int B, int T, float grad_scale, bool accumulate);
  // Uses `external` (owned by the caller, e.g. the trainer's, whose state checkpoints carry)
  // instead of this object's own fp16 scaler; null restores the own one. fp16 only.
  void use_loss_scaler(LossScaler* external);
  // step() with train/step.cpp's order and numeric guard: fp16 unscale + inf check (a hit
  // skips the step and halves the scale), then the global norm read to the host; a
  // non-finite norm or `loss` makes no update (parameters and moments untouched); else clip
  // and AdamW. One host sync more than step() (the norm).
  using GuardedStep = DeviceOptimizer::GuardedStep;
  GuardedStep guarded_step(float loss, float lr, const AdamWHyper& hyper, float grad_clip, int64_t t);
  // The AdamW moments (host m[num_params()], v[num_params()], the table's layout, as
  // optim/adamw.h's AdamW::m()/v()). upload_moments after upload_params (which zeroes them).
  void upload_moments(const float* m, const float* v);
  void download_moments(float* m, float* v);
  // The fp16 loss scaler (null in other precisions).
  const LossScaler* loss_scaler() const;
  // Points a caller's optimizer (device_optimizer.h, e.g. Sophia's) at this model's fp32
  // masters, fp32 gradients and 16-bit copy, so that its updates are what forward reads next.
  // step() and the moments above use this object's own AdamW instead.
  void bind_optimizer(DeviceOptimizer& optimizer);

  // --- Sophia (optim/sophia.h) ---
  // Sophia's Gauss-Newton-Bartlett pass, model/gpt2.h's Gpt2::forward_backward_sampled on the
  // device: forward; each position's label drawn from the model's own softmax inside the fused
  // loss (cuda::crossentropy_sampled_forward_backward, RNG (seed, counter): the CPU's labels
  // except where a row's uniform lies within fp32 rounding of a CDF boundary); backward. The
  // gradients of grad_scale · the mean loss over all B·T positions on those labels are WRITTEN
  // (=; the CPU adds) to the fp32 gradient buffer. sampled[B*T] (host, =) the drawn labels.
  // Returns that mean loss. Host syncs: the batch upload, the loss and label downloads.
  float forward_backward_sampled(const int* tokens, int* sampled, int B, int T, float grad_scale, uint64_t seed,
                                 uint64_t counter);

  // --- data-parallel overlap: the gradient-ready hook ---
  // While set (null = none), every forward_backward / forward_backward_sampled call invokes
  // fn(begin, end) on the host, in this order: ln_f's range, then each layer's contiguous range
  // of the parameter table (layer L-1 down to 0), then [0, start of h.0) = wte + wpe. The
  // ranges are disjoint and cover [0, num_params()) exactly once per call. Each call comes
  // right after the work that makes the fp32 gradients [begin, end) final has been ENQUEUED on
  // ctx.stream() (16-bit modes: including their cast to fp32 and, accumulating, the add): the
  // device may not have run it yet, so the consumer records an event on ctx.stream() and
  // orders its own work (an all-reduce on another stream) after it; it must not read the
  // gradients on the host in the hook. Nothing in the rest of the call writes a range after it
  // was announced. The stepper sets the hook for the last micro-batch only.
  using GradReadyFn = std::function<void(size_t begin, size_t end)>;
  void set_grad_ready(GradReadyFn fn);
  // The ranges the hook is called with, in its order, for `config`'s table (no GPU needed).
  static std::vector<std::pair<size_t, size_t>> grad_ready_ranges(const Gpt2Config& config);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mptrain::cuda
