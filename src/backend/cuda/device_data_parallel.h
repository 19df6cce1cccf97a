// NCCL data parallelism of a device stepper (train/device_step.h's DeviceParallel), one object
// shared by the GPT-2 and BERT steppers (gpt2_device_step.cpp, bert_device_step.cpp): the NCCL
// communicator bootstrapped over the run's host one, the averaging of the fp32 gradients over
// ranks (all-reduce; under ZeRO-1 reduced onto the CPU's partition, each piece to the rank whose
// shard holds it), the DeviceOptimizer's host reducers for sharded state (norm, overflow flag,
// win-rate counts), the ZeRO-1 all-gather of the updated parameters, and the seconds the host
// waited for all of it.
//
// What the ZeRO-1 all-gather moves is what the model reads: in bf16/fp16 the forward and
// backward read only the 16-bit copy, which each rank's update has written over its own shard,
// so the copy is gathered (half the bytes of fp32) and the fp32 masters outside this rank's
// shard go stale; fp32/TF32 runs read the masters and gather them. Stale masters are gathered
// (fp32) only when someone reads them whole: whole_masters(), called by the steppers'
// download_params (validation, samples, checkpoints), which makes that download a collective.
// Every rank's flag changes at the same calls (the steps' skip decisions are reduced over
// ranks), so every rank joins that all-gather or none does.
//
// Gradients are handed over per range as the backward makes them final (grad_ready(), installed
// as the model's gradient-ready hook, so the reduction overlaps the backward); sum_over_ranks()
// waits for the reductions.
// Without NCCL (one process, no --dist-backend nccl) every call is a no-op and sums are local.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/device_optimizer.h"
#include "backend/cuda/nccl_async.h"
#include "dist/communicator.h"
#include "train/device_step.h"

namespace mptrain::cuda {

class DeviceDataParallel {
 public:
  // Creates the NCCL communicator when par asks for one (ranks > 1, or --dist-backend nccl): a
  // collective over par.dp's host communicator, so every rank constructs this at the same point,
  // after its Context has made the rank's GPU current.
  explicit DeviceDataParallel(const DeviceParallel& par);
  ~DeviceDataParallel();
  DeviceDataParallel(const DeviceDataParallel&) = delete;
  DeviceDataParallel& operator=(const DeviceDataParallel&) = delete;

  // One process per GPU: the local rank picks it (as make_nccl_communicator does); 0 alone.
  static int device_of(const DeviceParallel& par);
  // The DeviceOptimizer's segments: this rank's range of the CPU's partition under ZeRO-1,
  // else none (every coordinate).
  static std::vector<FlatRange> owned_segments(const DeviceParallel& par);

  bool active() const { return nccl_ != nullptr; }
  int world_size() const { return world_; }
  bool sharded() const;

  // Under ZeRO-1: the optimizer's norm, overflow flag and win-rate counts summed over ranks.
  void attach(DeviceOptimizer& optimizer);
  // A gradient-ready hook: grads[begin, end) averaged over ranks on NCCL's stream after the work
  // enqueued so far on ctx's stream. Null when not active (no hook to install).
  std::function<void(size_t begin, size_t end)> grad_ready(DeviceOptimizer& optimizer, Context& ctx);
  // Waits for the enqueued reductions (the gradients are then the mean over ranks, this rank's
  // range under ZeRO-1) and returns the sum of `local` over ranks; `local` when not active.
  double sum_over_ranks(double local);
  // ZeRO-1 after an update: every rank's parameters as the model reads them whole again (the
  // 16-bit copy when there is one, which leaves the masters stale; else the fp32 masters).
  void gather_params(DeviceOptimizer& optimizer, Context& ctx);
  // The fp32 masters whole on this rank: all-gathers them if a 16-bit gather left them stale.
  // A collective when they are stale (then on every rank, see above); else nothing.
  void whole_masters(DeviceOptimizer& optimizer, Context& ctx);
  // The masters were written whole from the host (upload, resume, rollback).
  void masters_uploaded() { masters_whole_ = true; }
  // Seconds the host waited for collectives since the last call (then reset).
  double take_comm_seconds();

 private:
  DeviceParallel par_;
  std::unique_ptr<Communicator> nccl_;  // null: one process without NCCL
  NcclAsync* async_ = nullptr;          // nccl_'s asynchronous side
  int world_ = 1;
  double comm_seconds_ = 0.0;
  // False after a 16-bit all-gather, until whole_masters() or an upload. A world of one (one GPU,
  // --dist-backend nccl) marks them stale too, so that it runs the same calls (its all-gathers
  // move nothing).
  bool masters_whole_ = true;
};

}  // namespace mptrain::cuda
