// The optimizer half of a training step on the GPU, for any model whose parameters are one
// flat fp32 device buffer laid out by a ParamTable (cuda::Gpt2Device, cuda::BertDevice through
// bind()): it owns the optimizer state (AdamW m, v or Sophia-G m, h), the decay mask and
// the step's device scalars (norm scratch, clip factor, fp16 overflow flag), and runs
// train/step.cpp's order on the device: fp16 unscale + check through the LossScaler, the global
// norm read to the host, the numeric guard, clip, update (and the 16-bit parameter copy), and
// for Sophia the Hessian EMA from a sampled-label gradient with its own norm and clip.
//
// Ownership of coordinates: a list of `segments` of the flat table, each [begin, end), whose
// state lives packed in this object (every segment at a 64-float boundary, so each one's
// mask words and float4 groups start aligned). One segment [0, N) is the single-process and
// ZeRO-off case; ZeRO-1 passes this rank's slices. Weight decay and
// Sophia's real (unpadded) coordinates follow the table through dist's shard_param_table, so
// a segment may cut a tensor anywhere its begin is a multiple of 16.
//
// Checkpoints stay the CPU's: upload/download exchange the state with a host Optimizer of the
// same kind (optim/adamw.h's m, v; optim/sophia.h's m, h and its Hessian counter) over the
// whole table, or, for a one-segment object, over that segment alone (the CPU's ZeRO-1 shard
// optimizer of dist/data_parallel.h, whose gather/scatter then make checkpoints whole).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/device_buffer.h"
#include "core/dtype.h"
#include "core/param_table.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"
#include "optim/sophia.h"
#include "precision/loss_scaler.h"

namespace mptrain::cuda {

struct DeviceOptimizerConfig {
  OptimizerKind kind = OptimizerKind::AdamW;
  AdamWHyper adamw;
  SophiaHyper sophia;
  double tokens_per_step = 1.0;  // Sophia's b in ρ·b·h
  uint64_t seed = 0;             // Sophia's label-sampling seed (the run's)
};

// The kind and hyper-parameters of a host optimizer (AdamW or Sophia), to mirror it on the GPU.
DeviceOptimizerConfig device_optimizer_config(const Optimizer& host);

// [begin, end) of the flat parameter buffer.
struct FlatRange {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

// Host-side reductions over ranks when the state is sharded (ZeRO-1): every rank passes its
// local value, every rank gets the combined one. Empty = one process or replicated state.
struct ShardReducer {
  std::function<double(double)> sum;
  std::function<bool(bool)> any;
};

class DeviceOptimizer {
 public:
  // table: the model's whole table (must outlive this object). segments: the coordinates
  // this object updates (empty = all of them), ascending and disjoint, each begin a multiple
  // of 16. Allocates and zeroes the state. Throws Error on bad segments or an unknown kind.
  DeviceOptimizer(const ParamTable& table, const DeviceOptimizerConfig& config, Context& ctx,
                  std::vector<FlatRange> segments = {});
  ~DeviceOptimizer();
  DeviceOptimizer(const DeviceOptimizer&) = delete;
  DeviceOptimizer& operator=(const DeviceOptimizer&) = delete;

  // The model's device buffers, each of table.total() elements: fp32 masters and gradients,
  // and the 16-bit copy the forward reads (nullable; lowp_type BF16 or F16). 256-byte aligned.
  void bind(float* params, float* grads, void* lowp, StorageType lowp_type);
  // fp16's dynamic loss scaler (the caller's; null in other precisions).
  void set_loss_scaler(LossScaler* scaler) { scaler_ = scaler; }
  LossScaler* loss_scaler() const { return scaler_; }
  void set_reducer(ShardReducer reducer) { reducer_ = std::move(reducer); }
  // AdamW's hyper-parameters for the next steps (Gpt2Device::step takes them per call).
  void set_adamw_hyper(const AdamWHyper& hyper) { config_.adamw = hyper; }

  const DeviceOptimizerConfig& config() const { return config_; }
  float* params() const { return params_; }
  float* grads() const { return grads_; }
  // The bound 16-bit copy (null in fp32/TF32): every update writes it over this object's
  // segments, from the masters it has just updated; under ZeRO-1 the all-gather of the copy
  // brings in the other ranks' segments (device_data_parallel.h).
  void* param_copy() const { return lowp_; }
  const std::vector<FlatRange>& segments() const { return segments_; }
  size_t device_bytes() const;

  // Unguarded step (no host sync but fp16's one flag read): fp16 unscale + check, device norm
  // and clip factor, update skipped on the device by the overflow flag. Returns false when
  // fp16 skipped it. One segment, no reducer (the single-GPU benchmark's step).
  bool step(float lr, float grad_clip, int64_t t);

  // train/step.cpp's order after the gradients are final (averaged over ranks): fp16 unscale
  // and check (a hit: scale halved, nothing updated), the global norm on the host, the
  // numeric guard (non-finite loss or norm: nothing updated), clip, update.
  struct GuardedStep {
    double grad_norm = 0.0;   // before clipping; inf when skipped
    bool skipped = false;     // fp16 overflow
    bool non_finite = false;  // non-finite loss or norm without a scaler hit
  };
  GuardedStep guarded_step(float loss, float lr, float grad_clip, int64_t t);

  // --- Sophia's curvature estimate (AdamW never asks) ---
  bool curvature_due(int64_t t) const;
  uint64_t curvature_seed() const { return config_.seed; }
  uint64_t curvature_counter() const { return hessian_updates_; }
  // The bound gradient buffer holds ĝ (the sampled-label gradient, times the loss scale under
  // fp16): unscale + check (a hit drops the estimate, the scale unchanged, as the CPU),
  // norm, a non-finite norm drops it, clip to grad_clip, h EMA, counter + 1, win rate over the
  // real coordinates. `made` false = dropped.
  struct Curvature {
    bool made = false;
    double norm = 0.0;
    double win_rate = 0.0;
  };
  Curvature update_curvature(float grad_clip);

  // The state from/to a host optimizer of the same kind over the whole table, or over this
  // object's one segment (its state() buffers and scalar state); only this object's segments
  // are read/written. Synchronous.
  void upload_state(const Optimizer& host);
  void download_state(Optimizer& host);
  // The state roles as host arrays of table.total() floats (state()'s order: AdamW m, v;
  // Sophia m, h); only the segments are read/written.
  // host_begin: the flat index of the arrays' first element (a segment's begin for a shard).
  void upload_state(const std::vector<const float*>& roles, size_t host_begin = 0);
  void download_state(const std::vector<float*>& roles, size_t host_begin = 0);
  void zero_state();

  // The gradient norm of the last step (before clipping; a host sync after step()).
  double last_grad_norm();

 private:
  struct Segment {
    FlatRange range;      // in the flat table
    size_t state = 0;     // offset into the packed state (a multiple of 64)
    std::vector<FlatRange> real;  // real (unpadded) coordinates, table-absolute, merged
  };
  size_t roles() const { return 2; }
  // Where a host optimizer's arrays start in the flat table (0, or the one segment's begin);
  // throws when it is of another kind or covers neither.
  size_t host_begin_of(const Optimizer& host) const;
  float* role(int r) const;
  float rho_b() const;
  // fp16: unscale every segment's gradients and check them (over ranks with a reducer);
  // returns true on an overflow. Without a scaler: false.
  bool unscale_and_check_overflow(float scale);
  // Global norm of the segments' gradients (over ranks with a reducer), on the host.
  double gradient_norm();
  void upload_clip(float clip);
  void update(float lr, int64_t t, const int* skip);
  // Sophia: the fraction of real coordinates with |m| < ρ·b·h (over ranks with a reducer).
  double win_rate();

  const ParamTable& table_;
  DeviceOptimizerConfig config_;
  Context& ctx_;
  std::vector<Segment> segments_vec_;
  std::vector<FlatRange> segments_;
  size_t state_size_ = 0;
  DeviceMemory state_, mask_, scalars_;
  size_t norm_scratch_ = 0, norms_ = 0, clip_ = 0, found_inf_ = 0, count_ = 0;  // byte offsets in scalars_
  float* params_ = nullptr;
  float* grads_ = nullptr;
  void* lowp_ = nullptr;
  StorageType lowp_type_ = StorageType::BF16;
  LossScaler* scaler_ = nullptr;
  ShardReducer reducer_;
  uint64_t hessian_updates_ = 0;
  double last_norm_ = 0.0;
  bool norm_on_device_ = false;  // step() left the norm on the device, unread
};

}  // namespace mptrain::cuda
