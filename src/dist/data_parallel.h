// Data parallelism for one optimizer step: what changes when a step's batch is spread over
// ranks, kept in one object so that train/step.cpp reads the same with or without it.
//
// Every rank holds the whole model and computes the gradient of its slice of the global
// batch (data/loader.h gives rank r the r-th B×T slice of each global window). Then:
//   ZeRO off: all-reduce (mean) of the gradient; every rank runs the optimizer on every
//             parameter (identical inputs, identical bits).
//   ZeRO-1:   reduce-scatter (mean) of the gradient; rank r keeps the optimizer state of only
//             its contiguous shard [begin, end) of the flat parameter buffer (a Partition,
//             cutting through tensors where it falls), updates that shard, and all-gathers the
//             parameters. The global gradient norm is the square root of the shard sums of
//             squares, summed over ranks.
//   ZeRO-2:   as ZeRO-1, and the gradients are sharded too: every backward (each micro-batch's,
//             not only the last) reduces each range as it hands it (a sum, the step's last one
//             the mean) into the ranks that own its pieces, and the pieces a rank does not own
//             are discarded at once (MemoryResource::discard: zero, and on the host their pages
//             go back to the system). So a rank holds its shard of the gradients, accumulated
//             over the micro-batches, and of the rest only what the backward has not handed
//             yet. The accumulation's order differs from ZeRO-1's (each micro-batch is reduced
//             over ranks before the next is added): the same bits with one micro-batch, within
//             rounding with more. On a GPU the discarded pieces are zeroed, not freed (device
//             memory is one allocation): the memory is the host's win for now.
//
// The optimizer of a ZeRO rank is an ordinary one built over shard_param_table(): the
// pieces of the tensors that fall in the shard, as 1-D tensors with their tensor's name,
// weight-decay flag and real (unpadded) prefix. Called with parameter and gradient pointers
// offset by begin(), it updates exactly the shard, with per-tensor rules intact at the
// cuts. So any Optimizer shards without knowing it.
//
// Overlap (set_overlap): the step's last backward hands each range of the gradients to the
// communicator as soon as nothing later writes it (the model's gradient-ready hook,
// model/weight_grads.h), so NCCL reduces a block while the GPU computes the next one's gradients;
// average_gradients() then only waits. Host communicators reduce each range at once (the CPU
// computes synchronously: nothing to overlap, so the default reduces once after the backward).
//
// Checkpoints stay those of a single process (train/checkpoint.h): the optimizer state is
// gathered whole onto rank 0, which writes it; a resuming rank of any world size and either ZeRO
// stage reads the whole state and keeps its shard.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/param_table.h"
#include "dist/communicator.h"
#include "optim/optimizer.h"

namespace mptrain {

enum class ZeroStage { Off = 0, One = 1, Two = 2 };

// 0, 1 or 2 (the --zero flag); throws Error otherwise.
ZeroStage zero_stage_from_int(int stage);

// The part of `table` that lies in [begin, end) of its flat buffer, as one 1-D entry per
// tensor piece (in order, offsets from 0 = begin), keeping name, decay flag and, as
// hf_shape, how many of the piece's elements are real (not vocabulary padding). A tensor that
// lies whole in the range keeps its entry as it is (shape, matrix layout): Muon needs its shape.
ParamTable shard_param_table(const ParamTable& table, size_t begin, size_t end);

// Builds an optimizer of the run's kind and hyper-parameters over a table.
using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(const ParamTable& table)>;

class DataParallel {
 public:
  // table: the model's parameter table (must outlive this object). whole: ranges of the flat
  // buffer a ZeRO shard must hold whole (Muon's matrices: muon_whole_ranges); the shards are
  // then cut only outside them, as near the even split as they allow. ZeRO-2 on one rank (nothing
  // to shard over) is an Error.
  DataParallel(Communicator& comm, const ParamTable& table, ZeroStage zero,
               const std::vector<ParamRange>& whole = {});

  Communicator& comm() { return comm_; }
  ZeroStage zero() const { return zero_; }
  int rank() const { return comm_.rank(); }
  int world_size() const { return comm_.world_size(); }
  bool is_root() const { return comm_.is_root(); }
  const Partition& partition() const { return partition_; }
  // This rank's range of the flat buffer in the optimizer: [0, N) without ZeRO.
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  bool sharded() const { return zero_ != ZeroStage::Off; }
  // The table to build this rank's optimizer over: the model's, or with ZeRO the shard's.
  const ParamTable& optimizer_table() const { return sharded() ? shard_table_ : table_; }

  // The collectives work on the buffers in place where the communicator reaches their memory
  // (MPI and host memory, NCCL and device memory); a GPU's buffer under MPI crosses through a
  // host mirror (core/buffer.h).
  // Rank 0's parameters to every rank (start of a run: all ranks begin from the same bits).
  void broadcast_params(FloatBuffer& params);

  // Whether each range is reduced when the backward hands it (see above; always under ZeRO-2).
  // Needs a communicator that reaches the gradients' memory (no host mirror per range); throws
  // Error naming the mismatch otherwise.
  void set_overlap(bool on, const FloatBuffer& grads);
  bool overlaps() const { return overlap_; }
  // The step's gradients start at zero (ZeRO-2: discarded, so only what a backward writes is held).
  void zero_gradients(FloatBuffer& grads);
  // Called before each backward: whether this one completes the gradients to reduce (the
  // step's last micro-batch, or the curvature pass). Ranges of an unarmed backward are left;
  // ZeRO-2 arms every backward (a sum before the last, the mean with it).
  void arm(bool last_backward);
  // The gradient-ready hook: starts the reduction of grads[range] when armed.
  void reduce_ready(FloatBuffer& grads, ParamRange range);
  // Called after each backward. ZeRO-2: waits for its reductions (which must have covered the
  // whole buffer) and discards the pieces other ranks own that were not discarded yet.
  void after_backward(FloatBuffer& grads);
  // grads[begin(), end()) ← the mean over ranks; without ZeRO that is the whole buffer, with
  // ZeRO-1 the rest of grads is left unspecified. After an armed backward it waits for the
  // ranges' reductions (which must have covered the whole buffer) instead; under ZeRO-2 the
  // backwards have reduced everything already (after_backward).
  void average_gradients(FloatBuffer& grads);
  // L2 norm of the averaged gradient over all N elements (after average_gradients), from
  // `local`, the norm of this rank's range grads[begin(), end()) (the backend's, train/step.cpp).
  // A collective under ZeRO.
  double global_norm(double local);
  // The optimizer update of [begin(), end()) with the gradients grads·grad_scale (the clip
  // factor, Optimizer::step), then with ZeRO the all-gather that makes
  // every rank's parameters whole. opt must be built over optimizer_table().
  void optimizer_step(Optimizer& opt, FloatBuffer& params, const FloatBuffer& grads, float lr, int64_t t,
                      float grad_scale);
  // A fraction this rank's optimizer measured over the real (unpadded) coordinates of its
  // range (Sophia's win rate), as the fraction over all of them. A collective under ZeRO.
  double global_fraction(double local);

  // Seconds spent in this object's collectives since the last call (then reset): the
  // transfers plus any wait for slower ranks. For the log's communication share.
  double take_comm_seconds();

  // Checkpoints. With ZeRO, gathers every rank's optimizer state into a new optimizer over
  // the whole table (made by `make`), returned on rank 0 and nullptr elsewhere; a collective.
  // Without ZeRO, returns nullptr: `local` is already whole.
  std::unique_ptr<Optimizer> gather_optimizer(const Optimizer& local, const OptimizerFactory& make);
  // Copies this rank's range of a whole optimizer's state (e.g. read from a checkpoint) into
  // `local` (built over optimizer_table()), scalar state included. No communication.
  void scatter_optimizer(const Optimizer& whole, Optimizer& local) const;

 private:
  Communicator& comm_;
  const ParamTable& table_;
  ZeroStage zero_;
  Partition partition_;
  size_t begin_ = 0, end_ = 0;
  ParamTable shard_table_;
  size_t real_in_range_ = 0;  // real (not padding) elements in [begin_, end_)
  double comm_seconds_ = 0.0;
  bool overlap_ = false, armed_ = false;
  ReduceOp op_ = ReduceOp::Avg;  // of an armed backward's reductions
  size_t reduced_ = 0;  // elements whose reduction reduce_ready started since the last wait
  std::vector<ParamRange> to_discard_;  // ZeRO-2 on an asynchronous communicator: after the wait
};

}  // namespace mptrain
