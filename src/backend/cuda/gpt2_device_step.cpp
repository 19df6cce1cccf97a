// train/device_step.h on the GPU: cuda::Gpt2Device driven with train_step's order (zero,
// accumulate micro-batches with loss_scale/accum, then cuda::DeviceOptimizer: fp16
// unscale/skip, numeric guard, clip, AdamW or Sophia, and Sophia's curvature pass on the last
// micro-batch), the trainer's LossScaler in place of the device's own.
//
// Data parallelism (train/device_step.h's DeviceParallel) over an NCCL communicator bootstrapped
// over the run's host one: after the micro-batches, the loss is summed and the fp32 gradients
// averaged over ranks (ZeRO off: all-reduce; ZeRO-1: reduce-scatter onto the CPU's partition,
// this rank's DeviceOptimizer over its range, the norm/overflow/win-rate reduced over ranks),
// then after a ZeRO-1 update the all-gather of the parameters and the refreshed 16-bit copy.
// Overlap: during the last micro-batch (and the curvature pass) Gpt2Device's gradient-ready
// hook hands each range (ln_f, layer L-1 ... 0, embeddings) to NCCL's stream as soon as the
// backward has enqueued it (nccl_async.h), so the reduction of a layer's gradients runs while
// the backward of the layers before it computes; the optimizer waits for all of them.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/device_optimizer.h"
#include "backend/cuda/gpt2_device.h"
#include "backend/cuda/nccl_async.h"
#include "backend/device.h"
#include "core/error.h"
#include "dist/nccl_communicator.h"
#include "train/device_step.h"

namespace mptrain {

namespace {

// One process per GPU: the local rank picks it (as make_nccl_communicator does).
int device_of(const DeviceParallel& par) {
  const int devices = cuda_device_count();
  return par.dp && devices > 0 ? par.dp->comm().local_rank() % devices : 0;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool sharded(const DeviceParallel& par) { return par.dp && par.dp->zero() == ZeroStage::One; }

// ZeRO-1: the optimizer owns this rank's range of the CPU's partition; else every coordinate.
std::vector<cuda::FlatRange> owned_segments(const DeviceParallel& par) {
  if (!sharded(par)) return {};
  return {{par.dp->begin(), par.dp->end()}};
}

class Gpt2CudaStepper final : public DeviceStepper {
 public:
  Gpt2CudaStepper(const Gpt2Config& config, Precision precision, int B, int T, const Optimizer& optimizer,
                  LossScaler* scaler, const DeviceParallel& par)
      : par_(par),
        ctx_(device_of(par)),
        device_(config, precision, B, T, ctx_),
        optimizer_(device_.table(), cuda::device_optimizer_config(optimizer), ctx_, owned_segments(par)),
        scaler_(scaler),
        B_(B),
        T_(T) {
    MPT_CHECK(needs_loss_scaler(precision) == (scaler != nullptr),
              "[train] --device cuda: fp16 needs the run's loss scaler, other precisions none");
    if (scaler) device_.use_loss_scaler(scaler);
    device_.bind_optimizer(optimizer_);
    optimizer_.set_loss_scaler(scaler);
    inputs_.resize(static_cast<size_t>(B) * T);
    targets_.resize(static_cast<size_t>(B) * T);
    if (par.dp && (par.nccl || par.dp->world_size() > 1)) {
      Communicator& host = par.dp->comm();
      nccl_ = make_nccl_communicator(host, host.timeout_seconds());
      async_ = cuda::nccl_async(*nccl_);
      world_ = nccl_->world_size();
      // Sharded state: the norm, the overflow flag and the win rate's counts are per rank.
      if (sharded(par))
        optimizer_.set_reducer({[this](double x) { return nccl_->sum(x); }, [this](bool f) { return nccl_->any(f); }});
    }
  }

  void upload(const float* params, const Optimizer& optimizer) override {
    device_.upload_params(params);
    optimizer_.upload_state(optimizer);
    ctx_.synchronize();
  }

  StepStats step(const NextBatchFn& next_batch, int accum, float lr, float grad_clip, int64_t t) override {
    MPT_CHECK(accum > 0, "[train] gradient accumulation steps must be positive");
    StepStats stats;
    stats.loss_scale = scaler_ ? scaler_->scale() : 1.0f;
    double loss_sum = 0.0;
    for (int micro = 0; micro < accum; ++micro) {
      next_batch(inputs_.data(), targets_.data());
      // The last micro-batch's ranges are final as its backward goes: reduce them meanwhile.
      if (micro == accum - 1) overlap_reduction(true);
      // The first micro-batch writes the gradients (the CPU step's zero), the rest add.
      loss_sum += device_.forward_backward(inputs_.data(), targets_.data(), B_, T_,
                                           stats.loss_scale / static_cast<float>(accum), micro > 0);
    }
    overlap_reduction(false);
    loss_sum = average_over_ranks(loss_sum);
    stats.loss = static_cast<float>(loss_sum / (static_cast<double>(accum) * world_));
    const cuda::DeviceOptimizer::GuardedStep g = optimizer_.guarded_step(stats.loss, lr, grad_clip, t);
    stats.grad_norm = g.grad_norm;
    stats.skipped = g.skipped;
    stats.non_finite = g.non_finite;
    if (!g.skipped && !g.non_finite) gather_params();
    if (!g.skipped && !g.non_finite && optimizer_.curvature_due(t)) curvature(stats, grad_clip);
    return stats;
  }

  void download_params(float* params) override { device_.download_params(params); }
  void download_state(Optimizer& optimizer) override { optimizer_.download_state(optimizer); }
  void download_grads(float* grads) override { device_.download_grads(grads); }
  double take_comm_seconds() override {
    const double s = comm_seconds_;
    comm_seconds_ = 0.0;
    return s;
  }

 private:
  // train/step.cpp's curvature pass: the step's last micro-batch (inputs_ still holds it),
  // labels drawn with the optimizer's (seed, counter) into targets_, the gradient of their
  // mean loss times the scaler's current scale, the one the unscale divides by (this step's
  // update may have grown it past stats.loss_scale; written over the training gradients, which
  // the update has consumed), then the optimizer's unscale/norm/clip/Hessian update.
  void curvature(StepStats& stats, float grad_clip) {
    overlap_reduction(true);
    const float scale = scaler_ ? scaler_->scale() : 1.0f;
    const float loss = device_.forward_backward_sampled(inputs_.data(), targets_.data(), B_, T_, scale,
                                                        optimizer_.curvature_seed(), optimizer_.curvature_counter());
    overlap_reduction(false);
    stats.curvature_loss = static_cast<float>(average_over_ranks(loss) / world_);
    const cuda::DeviceOptimizer::Curvature c = optimizer_.update_curvature(grad_clip);
    stats.curvature = c.made;
    stats.curvature_norm = c.norm;
    stats.win_rate = c.win_rate;
  }

  // With NCCL, on: each gradient range the backward finishes is averaged over ranks on NCCL's
  // stream (every rank, or under ZeRO-1 the ranks whose shards hold it); off: no hook.
  void overlap_reduction(bool on) {
    if (!async_) return;
    if (!on) {
      device_.set_grad_ready(nullptr);
      return;
    }
    const Partition* part = sharded(par_) ? &par_.dp->partition() : nullptr;
    device_.set_grad_ready([this, part](size_t begin, size_t end) {
      async_->reduce_async(optimizer_.grads(), begin, end, part, ReduceOp::Avg, ctx_.stream());
    });
  }

  // With NCCL: waits for the overlapped reductions (the gradients are then the mean over ranks,
  // this rank's range under ZeRO-1) and returns the sum of `local` over ranks. Without: `local`.
  double average_over_ranks(double local) {
    if (!nccl_) return local;
    const auto start = std::chrono::steady_clock::now();
    async_->wait_async();
    const double sum = nccl_->sum(local);
    comm_seconds_ += seconds_since(start);
    return sum;
  }

  // ZeRO-1 after an update: every rank's parameters whole again, and the 16-bit copy with them.
  void gather_params() {
    if (!nccl_ || !sharded(par_)) return;
    ctx_.synchronize();
    const auto start = std::chrono::steady_clock::now();
    nccl_->all_gather(optimizer_.params(), par_.dp->partition());
    comm_seconds_ += seconds_since(start);
    optimizer_.refresh_param_copy();
  }

  DeviceParallel par_;
  cuda::Context ctx_;
  cuda::Gpt2Device device_;
  cuda::DeviceOptimizer optimizer_;
  std::unique_ptr<Communicator> nccl_;  // null: one process without NCCL
  cuda::NcclAsync* async_ = nullptr;    // nccl_'s asynchronous side
  int world_ = 1;
  double comm_seconds_ = 0.0;  // host waits for collectives since take_comm_seconds
  LossScaler* scaler_;
  int B_, T_;
  std::vector<int> inputs_, targets_;
};

}  // namespace

std::unique_ptr<DeviceStepper> make_gpt2_cuda_stepper(const Gpt2Config& config, Precision precision, int B, int T,
                                                      const Optimizer& optimizer, LossScaler* scaler,
                                                      const DeviceParallel& par) {
  const int devices = cuda_device_count();
  if (devices == 0)
    throw Error("[train] --device cuda: no CUDA device is visible (" + std::to_string(devices) + " devices)");
  return std::make_unique<Gpt2CudaStepper>(config, precision, B, T, optimizer, scaler, par);
}

}  // namespace mptrain
