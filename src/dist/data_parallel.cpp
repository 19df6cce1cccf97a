// Gradient averaging, global norm, clipping and the (sharded) optimizer update over ranks.
#include "dist/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include "core/error.h"

namespace mptrain {

namespace {
// Adds the lifetime of a scope to a seconds counter.
class ScopeTimer {
 public:
  explicit ScopeTimer(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~ScopeTimer() { total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};
// A buffer as a communicator takes it: in place where the communicator reaches its memory
// (host memory for MPI, device memory for NCCL), else through a host mirror.
template <typename T>
class CommBuffer {
 public:
  CommBuffer(const Communicator& comm, Buffer<T>& b, bool fetch = true) {
    if (reaches(comm, b)) {
      ptr_ = b.data();
    } else {
      mirror_.emplace(b, fetch);
      ptr_ = mirror_->data();
    }
  }
  CommBuffer(const Communicator& comm, const Buffer<T>& b) : CommBuffer(comm, const_cast<Buffer<T>&>(b)) {}
  T* data() { return ptr_; }
  // Writes a mirror back (nothing in place).
  void commit() {
    if (mirror_) mirror_->commit();
  }
  static bool reaches(const Communicator& comm, const Buffer<T>& b) {
    return comm.device_buffers() != b.memory().host_visible();
  }

 private:
  std::optional<HostMirror<T>> mirror_;
  T* ptr_ = nullptr;
};

}  // namespace

ZeroStage zero_stage_from_int(int stage) {
  if (stage == 0) return ZeroStage::Off;
  if (stage == 1) return ZeroStage::One;
  if (stage == 2) return ZeroStage::Two;
  throw Error("--zero " + std::to_string(stage) +
              ": supported ZeRO stages are 0 (off), 1 (optimizer state sharded) and 2 (gradients too)");
}

ParamTable shard_param_table(const ParamTable& table, size_t begin, size_t end) {
  MPT_CHECK(begin <= end && end <= table.total(), "[shard table] range [" + std::to_string(begin) + ", " +
                                                      std::to_string(end) + ") outside a table of " +
                                                      std::to_string(table.total()) + " elements");
  ParamTable shard;
  for (const auto& spec : table.specs()) {
    const size_t lo = std::max(begin, spec.offset), hi = std::min(end, spec.offset + spec.numel);
    if (lo >= hi) continue;
    // Real elements come first in a tensor (padding is whole rows at the end), so the real
    // part of the piece is a prefix of it too.
    if (lo == spec.offset && hi == spec.offset + spec.numel) {
      if (spec.matrix != MatrixLayout::None)
        shard.add_matrix(spec.name, spec.shape, spec.init, spec.matrix, spec.qkv);
      else
        shard.add(spec.name, spec.shape, spec.init, spec.decay, spec.hf_shape);
      continue;
    }
    const size_t real_end = spec.offset + spec.hf_numel();
    const size_t real = real_end > lo ? std::min(hi, real_end) - lo : 0;
    shard.add(spec.name, {static_cast<int64_t>(hi - lo)}, spec.init, spec.decay, {static_cast<int64_t>(real)});
    // A cut matrix keeps its layout with a 1-D shape, so that Muon refuses it (muon_matrices).
    if (spec.matrix != MatrixLayout::None) shard.mark_matrix(spec.matrix, spec.qkv);
  }
  return shard;
}

namespace {
Partition shard_partition(const ParamTable& table, int world, const std::vector<ParamRange>& whole) {
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const ParamRange& r : whole) ranges.emplace_back(r.begin, r.end);
  return ranges.empty() ? Partition(table.total(), world)
                        : partition_keeping_whole(table.total(), world, ranges);
}
}  // namespace

DataParallel::DataParallel(Communicator& comm, const ParamTable& table, ZeroStage zero,
                           const std::vector<ParamRange>& whole)
    : comm_(comm), table_(table), zero_(zero), partition_(shard_partition(table, comm.world_size(), whole)) {
  MPT_CHECK(zero_ != ZeroStage::Two || comm_.world_size() > 1,
            "--zero 2 shards the gradients over ranks, and this run has one: launch it with mpirun or srun "
            "on 2 or more ranks (or use --zero 0)");
  if (sharded()) {
    begin_ = partition_.begin(comm_.rank());
    end_ = partition_.end(comm_.rank());
    shard_table_ = shard_param_table(table_, begin_, end_);
  } else {
    begin_ = 0;
    end_ = table_.total();
  }
  for (const auto& spec : optimizer_table().specs()) real_in_range_ += spec.hf_numel();
}

void DataParallel::broadcast_params(FloatBuffer& params) {
  if (world_size() == 1) return;
  CommBuffer<float> buf(comm_, params);
  comm_.broadcast(buf.data(), table_.total() * sizeof(float), 0);
  buf.commit();
}

void DataParallel::set_overlap(bool on, const FloatBuffer& grads) {
  on = on || zero_ == ZeroStage::Two;  // its gradients are sharded as the backward hands them
  MPT_CHECK(
      !on || CommBuffer<float>::reaches(comm_, grads),
      std::string(zero_ == ZeroStage::Two
                      ? "--zero 2 reduces each range of the gradients as the backward hands it, which needs "
                      : "[data parallel] overlapping the gradient reduction with the backward needs ") +
          "a communicator that reaches the gradients' memory; " + comm_.backend() +
          " reaches them only through host copies" +
          (zero_ == ZeroStage::Two ? " (GPU ranks: --dist-backend nccl)" : ""));
  overlap_ = on;
  armed_ = false;
}

void DataParallel::zero_gradients(FloatBuffer& grads) {
  if (zero_ == ZeroStage::Two)
    grads.discard(0, grads.size());
  else
    grads.zero();
}

void DataParallel::arm(bool last_backward) {
  armed_ = overlap_ && world_size() > 1 && (last_backward || zero_ == ZeroStage::Two);
  // ZeRO-2's earlier backwards sum into the owner's shard, which the next backward adds to; the
  // last one's mean then divides the whole sum.
  op_ = last_backward ? ReduceOp::Avg : ReduceOp::Sum;
}

void DataParallel::reduce_ready(FloatBuffer& grads, ParamRange range) {
  if (!armed_ || range.size() == 0) return;
  ScopeTimer timer(comm_seconds_);
  comm_.reduce_range(grads.data(), range.begin, range.end, sharded() ? &partition_ : nullptr, op_);
  reduced_ += range.size();
  if (zero_ != ZeroStage::Two) return;
  // The pieces other ranks own: at once where the reduction has completed (a host
  // communicator's), else after the wait (after_backward).
  for (const PartitionSlice& piece : slices_of(partition_, range.begin, range.end)) {
    if (piece.rank == rank()) continue;
    if (comm_.device_buffers())
      to_discard_.push_back({piece.begin, piece.end});
    else
      grads.discard(piece.begin, piece.end - piece.begin);
  }
}

void DataParallel::after_backward(FloatBuffer& grads) {
  if (zero_ != ZeroStage::Two || !armed_) return;
  armed_ = false;
  ScopeTimer timer(comm_seconds_);
  MPT_CHECK(reduced_ == table_.total(), "[zero 2] the backward handed " + std::to_string(reduced_) + " of " +
                                            std::to_string(table_.total()) + " gradients to reduce");
  reduced_ = 0;
  comm_.wait_reductions();
  for (const ParamRange& r : to_discard_) grads.discard(r.begin, r.size());
  to_discard_.clear();
}

void DataParallel::average_gradients(FloatBuffer& grads) {
  armed_ = false;
  if (world_size() == 1 || zero_ == ZeroStage::Two) return;  // ZeRO-2: reduced by each backward
  ScopeTimer timer(comm_seconds_);
  if (reduced_ > 0) {
    MPT_CHECK(reduced_ == table_.total(), "[data parallel] the backward handed " + std::to_string(reduced_) +
                                              " of " + std::to_string(table_.total()) +
                                              " gradients to reduce");
    reduced_ = 0;
    comm_.wait_reductions();
    return;
  }
  CommBuffer<float> buf(comm_, grads);
  if (sharded()) {
    comm_.reduce_scatter(buf.data(), partition_, ReduceOp::Avg);
  } else {
    comm_.all_reduce(buf.data(), table_.total(), ReduceOp::Avg);
  }
  buf.commit();
}

double DataParallel::global_norm(double local) {
  if (!sharded()) return local;  // the range is the whole buffer
  ScopeTimer timer(comm_seconds_);
  return std::sqrt(comm_.sum(local * local));
}

void DataParallel::optimizer_step(Optimizer& opt, FloatBuffer& params, const FloatBuffer& grads, float lr,
                                  int64_t t, float grad_scale) {
  opt.step(params.data() + begin_, grads.data() + begin_, lr, t, grad_scale);
  if (sharded() && world_size() > 1) {
    ScopeTimer timer(comm_seconds_);
    CommBuffer<float> buf(comm_, params);
    comm_.all_gather(buf.data(), partition_);
    buf.commit();
  }
}

double DataParallel::take_comm_seconds() {
  const double s = comm_seconds_;
  comm_seconds_ = 0.0;
  return s;
}

double DataParallel::global_fraction(double local) {
  if (!sharded() || world_size() == 1) return local;
  const double total = comm_.sum(static_cast<double>(real_in_range_));
  return total > 0 ? comm_.sum(local * static_cast<double>(real_in_range_)) / total : 0.0;
}

std::unique_ptr<Optimizer> DataParallel::gather_optimizer(const Optimizer& local, const OptimizerFactory& make) {
  if (!sharded()) return nullptr;
  std::unique_ptr<Optimizer> whole;
  if (is_root()) {
    whole = make(table_);
    MPT_CHECK(whole && whole->kind() == local.kind() && whole->state().size() == local.state().size(),
              "[zero] the optimizer factory made an optimizer of another kind");
  }
  for (size_t i = 0; i < local.state().size(); ++i) {
    CommBuffer<float> mine(comm_, local.state()[i].buffer);
    if (!whole) {
      comm_.gather(nullptr, mine.data(), partition_, 0);
      continue;
    }
    CommBuffer<float> all(comm_, whole->state()[i].buffer, false);
    comm_.gather(all.data(), mine.data(), partition_, 0);
    all.commit();
  }
  if (whole) whole->set_scalar_state(local.scalar_state());
  return whole;
}

void DataParallel::scatter_optimizer(const Optimizer& whole, Optimizer& local) const {
  MPT_CHECK(whole.kind() == local.kind() && whole.state().size() == local.state().size(),
            std::string("[zero] cannot load ") + whole.name() + " state into " + local.name());
  const size_t n = end_ - begin_;
  for (size_t i = 0; i < local.state().size(); ++i) {
    const FloatBuffer& src = whole.state()[i].buffer;
    FloatBuffer& dst = local.state()[i].buffer;
    MPT_CHECK(src.size() == table_.total() && dst.size() == n,
              "[zero] optimizer state '" + local.state()[i].prefix + "' has an unexpected size");
    if (n > 0) dst.upload(HostMirror<float>(src).data() + begin_, n);
  }
  local.set_scalar_state(whole.scalar_state());
}

}  // namespace mptrain
