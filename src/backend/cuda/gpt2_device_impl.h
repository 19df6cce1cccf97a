// The private state of cuda::Gpt2Device (gpt2_device.h), shared by the files that implement
// it: gpt2_device.cpp (the buffer plan, forward and backward, uploads), gpt2_device_graphs.cpp
// (the step as CUDA graphs) and gpt2_device_optim.cpp (the optimizer step). Not for other code:
// include gpt2_device.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <type_traits>
#include <vector>

#include "backend/cuda/arena.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_optimizer.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/graph.h"
#include "backend/cuda/gpt2_device.h"
#include "model/gpt2.h"

namespace mptrain::cuda {

namespace gpt2_device_detail {

// Offsets of one layer's saved activations.
struct LayerActs {
  size_t ln1, ln1_mean, ln1_rstd, qkv, att, atty, residual2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu, residual3;
};

// Which loss the step computes: cross-entropy on the given targets, or on labels drawn from the
// model's own softmax (Sophia; forward_backward_sampled).
enum class LossKind { Targets, Sampled };

// A half-open range [begin, end) of the flat parameter table.
struct ParamRange {
  size_t begin = 0, end = 0;
};

// CUDA graphs of a step (Gpt2DeviceOptions::graphs; gpt2_device_graphs.cpp), one per
// (B, T, accumulate): what the captured kernels' frozen arguments depend on.
struct StepGraphKey {
  int B = 0, T = 0;
  bool accumulate = false;
  auto operator<=>(const StepGraphKey&) const = default;
};
// The forward, then the backward cut after each gradient-ready range (so that the hook can be
// called between launches). The loss runs eagerly between segment 0 and 1: the sampled loss's
// seed and counter change every call, and a kernel argument cannot change in a graph.
struct StepGraph {
  struct Segment {
    ExecGraph graph;
    bool announces = false;  // the range below is final once this segment has run
    ParamRange range;
  };
  std::vector<Segment> segments;
  void* scratch = nullptr;  // Context::scratch when captured: another area means capture again
};

inline StorageType storage_for(Precision p) {
  return p == Precision::Bf16 ? StorageType::BF16 : p == Precision::Fp16 ? StorageType::F16 : StorageType::F32;
}

}  // namespace gpt2_device_detail

using gpt2_device_detail::LayerActs;
using gpt2_device_detail::LossKind;
using gpt2_device_detail::ParamRange;
using gpt2_device_detail::StepGraph;
using gpt2_device_detail::StepGraphKey;
using gpt2_device_detail::storage_for;

struct Gpt2Device::Impl {
  Gpt2Config config;
  Precision precision;
  StorageType t;   // activations and the parameter copy the forward reads
  MathMode math;   // Fp32 or Tf32 when t is F32; ignored by 16-bit products
  bool lowp;       // t != F32: a 16-bit parameter copy and 16-bit gradients exist
  Context& ctx;
  ParamTable table;
  size_t n = 0;
  int plan_B = 0, plan_T = 0;
  std::unique_ptr<LossScaler> scaler;  // fp16 only
  LossScaler* external_scaler = nullptr;  // use_loss_scaler: the caller's, instead of scaler
  LossScaler* active_scaler() const { return external_scaler ? external_scaler : scaler.get(); }
  // 16-bit T with accumulation: one micro-batch's gradients cast to fp32 before the add
  // (allocated on the first accumulating call).
  DeviceMemory grads_acc;

  // One allocation per role: fp32 masters, fp32 gradients; the 16-bit parameter copy and
  // gradients (lowp only); activations + scratch (one arena).
  DeviceMemory params, grads, params_lp, grads_lp, acts;
  // The AdamW of step()/guarded_step() (device_optimizer.h), made on first use: a stepper with
  // an optimizer of its own (Sophia) never pays for these moments.
  std::unique_ptr<DeviceOptimizer> optimizer;
  DeviceOptimizer& own_optimizer();
  Arena arena;
  std::vector<LayerActs> layers;
  size_t encoded = 0, lnf = 0, lnf_mean = 0, lnf_rstd = 0, logits = 0, losses = 0, inputs = 0, proj = 0,
         dresidual = 0, dln = 0, dqkv = 0, datty = 0, dfch = 0, attn_scratch = 0, ln_scratch = 0, enc_scratch = 0;
  size_t enc_scratch_bytes = 0;
  // Host staging of one batch: tokens, targets and dloss as 4-byte words, uploaded in one copy.
  std::vector<int32_t> staging;
  std::vector<float> host_losses;
  // The kernels a step runs (gpt2_device.h), as applied: attention is Naive where flash is
  // unsupported. probs: the unfused loss's fp32 [B·T, Vp] probabilities (unfused only).
  Gpt2DeviceOptions options;
  size_t probs = 0;
  // The gradient-ready hook (gpt2_device.h) and the ranges it is called with, in backward
  // order: ln_f, layer L-1 ... layer 0 (layer_ranges[l]), then wte + wpe.
  GradReadyFn grad_ready;
  ParamRange lnf_range, embed_range;
  std::vector<ParamRange> layer_ranges;
  // CUDA graphs (options.graphs): the shapes already run eagerly (the warm-up that plans every
  // GEMM and grows Context::scratch), the captured steps, and, while capturing, what
  // grads_ready does instead of calling the hook (cut the capture there).
  std::set<StepGraphKey> warmed;
  std::map<StepGraphKey, StepGraph> step_graphs;
  std::function<void(ParamRange)> cut_capture;

  Impl(const Gpt2Config& c, Precision p, int B, int T, Context& cx)
      : config(c),
        precision(p),
        t(storage_for(p)),
        math(p == Precision::Tf32 ? MathMode::Tf32 : MathMode::Fp32),
        lowp(storage_for(p) != StorageType::F32),
        ctx(cx),
        table(gpt2_param_table(c)),
        n(table.total()),
        plan_B(B),
        plan_T(T) {}

  template <class U>
  U* at(size_t offset) const {
    return reinterpret_cast<U*>(static_cast<char*>(acts.get()) + offset);
  }
  // The parameters the forward reads: the fp32 masters (T = float) or their 16-bit copy.
  template <class T>
  T* param_copy() const {
    return static_cast<T*>(std::is_same_v<T, float> ? params.get() : params_lp.get());
  }
  // The batch region holds tokens[N] | targets[N] | dloss[N] for the current N = B·T.
  int* tokens_dev() const { return at<int>(inputs); }
  int* targets_dev(int N) const { return at<int>(inputs) + N; }
  float* dloss_dev(int N) const { return reinterpret_cast<float*>(at<int>(inputs) + 2 * static_cast<size_t>(N)); }

  void plan_buffers();
  void plan_grad_ranges();
  // Uploads the batch, runs the step, downloads the per-token losses (and the sampled labels);
  // returns the mean loss. targets: null for LossKind::Sampled.
  float run_step(const int* tokens, const int* targets, int* sampled, int B, int Tn, float grad_scale,
                 bool accumulate, LossKind loss, uint64_t seed, uint64_t counter);
  // The option-dependent pieces of forward and backward (fused kernel or unfused twin).
  template <class T>
  bool fuse_gelu() const {
    // The bias+GELU epilogue pays off in 16 bits but is slower than the unfused pair in
    // fp32/TF32 on an H100 (docs/dev/cuda.md, measured): 16-bit T only.
    return options.fused && !std::is_same_v<T, float>;
  }
  template <class T>
  void residual_layernorm(T* residual_out, T* out, float* mean, float* rstd, const T* a, const T* b, const T* weight,
                          const T* bias, int N);
  template <class T>
  void attention_fwd(const LayerActs& a, int B, int Tn);
  template <class T>
  void attention_bwd(T* dqkv, const T* dout, const LayerActs& a, int B, int Tn);
  // Enqueues forward, loss and backward of an uploaded batch: eagerly, or (options.graphs) as
  // graph launches after one eager warm-up per StepGraphKey (gpt2_device_graphs.cpp).
  void enqueue_step(int B, int Tn, bool accumulate, LossKind kind, uint64_t seed, uint64_t counter);
  template <class T>
  StepGraph capture_step(int B, int Tn, bool accumulate);
  template <class T>
  void forward(int B, int Tn);
  template <class T>
  void loss(int N, LossKind kind, uint64_t seed, uint64_t counter);
  template <class T>
  void backward(int B, int Tn, bool accumulate);
  // The fp32 gradients [r.begin, r.end) are final once this is enqueued: 16-bit T casts (and,
  // accumulating, adds) them from the T gradients; then the gradient-ready hook.
  template <class T>
  void grads_ready(ParamRange r, bool accumulate);
};

}  // namespace mptrain::cuda
