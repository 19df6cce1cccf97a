// NCCL collectives for GPU ranks (see dist/nccl_communicator.h). The communicator is made
// non-blocking (ncclConfig_t::blocking = 0) so that no NCCL call can hang the host: every
// call returns at once, possibly with ncclInProgress, and finish() polls NCCL's
// asynchronous state and the stream against the collective timeout, aborting the
// communicator when it passes.
//
// Uneven partitions (the last shard shorter) have no NCCL reduce-scatter/all-gather, so they
// run as one group of per-root ncclReduce / ncclBroadcast calls; even ones use NCCL's own
// in-place ncclReduceScatter / ncclAllGather.
//
// The communicator has its own stream. Every collective first waits (an event, not the host) for
// the work enqueued so far on the compute stream, the CUDA backend's, whose kernels wrote the
// buffers; the host then waits for the collective, so what the compute stream does next follows
// it. reduce_range does not wait on the host: a range's reduction runs while the backward goes on
// (PyTorch DDP's buckets, llm.c's overlapped all-reduce), and wait_reductions() waits once.
#include "dist/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "dist/watchdog.h"

namespace mptrain {

namespace {

void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) throw_library_error("CUDA", call, cudaGetErrorString(e), file, line);
}

// ncclInProgress is not a failure: a non-blocking communicator's call has been accepted and
// completes asynchronously (finish() waits for it).
void check_nccl(ncclResult_t r, const char* call, const char* file, int line) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  std::string what = ncclGetErrorString(r);
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) what += std::string(": ") + last;
  throw_library_error("NCCL", call, what, file, line);
}

#define MPT_CUDA_CHECK(call) ::mptrain::check_cuda((call), #call, __FILE__, __LINE__)
#define MPT_NCCL_CHECK(call) ::mptrain::check_nccl((call), #call, __FILE__, __LINE__)

// Makes `device` current for a scope and restores the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    MPT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) MPT_CUDA_CHECK(cudaSetDevice(device));
    changed_ = previous_ != device;
  }
  ~DeviceScope() {
    if (changed_) cudaSetDevice(previous_);
  }

 private:
  int previous_ = 0;
  bool changed_ = false;
};

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Avg ? ncclAvg : ncclSum; }

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const Topology& t, double timeout_s, int device, cudaStream_t compute)
      : Communicator(t, timeout_s),
        device_(device),
        compute_(compute),
        who_("rank " + std::to_string(t.rank) + " of " + std::to_string(t.world_size) + " (GPU " +
             std::to_string(device) + ")") {}

  // Creates the NCCL communicator; a collective over every rank.
  void init(const ncclUniqueId& id) {
    DeviceScope scope(device_);
    MPT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    MPT_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(double)));
    MPT_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    MPT_NCCL_CHECK(ncclCommInitRankConfig(&comm_, world_size(), id, rank(), &config));
    finish("init", 0, /*sync_stream=*/false);
  }

  ~NcclCommunicator() override {
    if (comm_) {
      if (std::uncaught_exceptions() > 0) {
        ncclCommAbort(comm_);  // peers may be waiting: do not flush, just let go
      } else {
        try {
          DeviceScope scope(device_);
          MPT_NCCL_CHECK(ncclCommFinalize(comm_));
          finish("finalize", 0, /*sync_stream=*/false);
          ncclCommDestroy(comm_);
        } catch (const std::exception&) {
          if (comm_) ncclCommAbort(comm_);
        }
      }
    }
    if (scratch_) cudaFree(scratch_);
    if (ready_) cudaEventDestroy(ready_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  const char* backend() const override { return "nccl"; }
  bool device_buffers() const override { return true; }

  void all_reduce(float* data, size_t n, ReduceOp op) override {
    DeviceScope scope(device_);
    after_compute();
    MPT_NCCL_CHECK(ncclAllReduce(data, data, n, ncclFloat32, nccl_op(op), comm_, stream_));
    finish("all_reduce", n);
  }

  void all_reduce(double* data, size_t n, ReduceOp op) override {
    DeviceScope scope(device_);
    after_compute();
    MPT_NCCL_CHECK(ncclAllReduce(data, data, n, ncclFloat64, nccl_op(op), comm_, stream_));
    finish("all_reduce", n);
  }

  void reduce_scatter(float* data, const Partition& part, ReduceOp op) override {
    check(part, "reduce_scatter");
    DeviceScope scope(device_);
    after_compute();
    if (part.uniform()) {
      // In place: NCCL's receive buffer is the send buffer at this rank's shard.
      MPT_NCCL_CHECK(ncclReduceScatter(data, data + part.begin(rank()), part.shard_size(), ncclFloat32, nccl_op(op),
                                       comm_, stream_));
    } else {
      MPT_NCCL_CHECK(ncclGroupStart());
      for (int r = 0; r < world_size(); ++r) {
        if (part.count(r) == 0) continue;
        float* p = data + part.begin(r);
        MPT_NCCL_CHECK(ncclReduce(p, p, part.count(r), ncclFloat32, nccl_op(op), r, comm_, stream_));
      }
      MPT_NCCL_CHECK(ncclGroupEnd());
    }
    finish("reduce_scatter", part.total());
  }

  void all_gather(float* data, const Partition& part) override {
    all_gather_impl(data, part, ncclFloat32, sizeof(float));
  }
  // No arithmetic: any 16-bit type moves bf16 bits unchanged.
  void all_gather(std::uint16_t* data, const Partition& part) override {
    all_gather_impl(data, part, ncclFloat16, sizeof(std::uint16_t));
  }

  void gather(float* data, const float* shard, const Partition& part, int root) override {
    check(part, "gather");
    check_root(root, "gather");
    DeviceScope scope(device_);
    after_compute();
    if (rank() == root) {
      MPT_CHECK(data != nullptr, "[gather] the root needs a buffer for the whole partition");
      const size_t own = part.count(root);
      if (own > 0 && shard != data + part.begin(root))
        MPT_CUDA_CHECK(cudaMemcpyAsync(data + part.begin(root), shard, own * sizeof(float), cudaMemcpyDeviceToDevice,
                                       stream_));
    }
    MPT_NCCL_CHECK(ncclGroupStart());
    if (rank() == root) {
      for (int r = 0; r < world_size(); ++r)
        if (r != root && part.count(r) > 0)
          MPT_NCCL_CHECK(ncclRecv(data + part.begin(r), part.count(r), ncclFloat32, r, comm_, stream_));
    } else if (part.count(rank()) > 0) {
      MPT_NCCL_CHECK(ncclSend(shard, part.count(rank()), ncclFloat32, root, comm_, stream_));
    }
    MPT_NCCL_CHECK(ncclGroupEnd());
    finish("gather", part.total());
  }

  void reduce(float* data, size_t n, ReduceOp op, int root) override {
    check_root(root, "reduce");
    DeviceScope scope(device_);
    after_compute();
    MPT_NCCL_CHECK(ncclReduce(data, data, n, ncclFloat32, nccl_op(op), root, comm_, stream_));
    finish("reduce", n);
  }

  void broadcast(void* data, size_t bytes, int root) override {
    check_root(root, "broadcast");
    DeviceScope scope(device_);
    after_compute();
    MPT_NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_));
    finish("broadcast", bytes);
  }

  void barrier() override {
    DeviceScope scope(device_);
    MPT_NCCL_CHECK(ncclAllReduce(scratch_, scratch_, 1, ncclFloat64, ncclSum, comm_, stream_));
    finish("barrier", 0);
  }

  void reduce_range(float* data, size_t begin, size_t end, const Partition* part, ReduceOp op) override {
    if (part) check(*part, "reduce_range");
    DeviceScope scope(device_);
    after_compute();
    float* p = data + begin;
    if (!part) {
      MPT_NCCL_CHECK(ncclAllReduce(p, p, end - begin, ncclFloat32, nccl_op(op), comm_, stream_));
    } else {
      MPT_NCCL_CHECK(ncclGroupStart());
      for (const PartitionSlice& s : slices_of(*part, begin, end))
        MPT_NCCL_CHECK(ncclReduce(data + s.begin, data + s.begin, s.end - s.begin, ncclFloat32, nccl_op(op), s.rank,
                                  comm_, stream_));
      MPT_NCCL_CHECK(ncclGroupEnd());
    }
    // A non-blocking communicator must have accepted one call before the next is made.
    finish("reduce_range", end - begin, /*sync_stream=*/false);
    pending_ += end - begin;
  }

  void wait_reductions() override {
    DeviceScope scope(device_);
    finish("overlapped gradient reduction", pending_);
    pending_ = 0;
  }

  // Host scalars go through the device scratch value.
  double sum(double x) override {
    DeviceScope scope(device_);
    MPT_CUDA_CHECK(cudaMemcpyAsync(scratch_, &x, sizeof(double), cudaMemcpyHostToDevice, stream_));
    MPT_NCCL_CHECK(ncclAllReduce(scratch_, scratch_, 1, ncclFloat64, ncclSum, comm_, stream_));
    finish("all_reduce", 1);
    MPT_CUDA_CHECK(cudaMemcpy(&x, scratch_, sizeof(double), cudaMemcpyDeviceToHost));
    return x;
  }

  bool any(bool flag) override { return sum(flag ? 1.0 : 0.0) > 0.0; }

 private:
  // Waits for the last call: first until NCCL has accepted it (a non-blocking communicator
  // may still be working on it after the call returned), then, if sync_stream, until the
  // stream has run it. Throws on an NCCL or CUDA error; ends the process on the timeout.
  void finish(const char* op, size_t elements, bool sync_stream = true) {
    using clock = std::chrono::steady_clock;
    const bool bounded = timeout_seconds() > 0.0;
    const auto start = clock::now();
    const auto deadline =
        start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_seconds()));
    for (int polls = 0;; ++polls) {
      ncclResult_t state = ncclSuccess;
      MPT_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
      if (state != ncclSuccess && state != ncclInProgress) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        check_nccl(state, op, __FILE__, __LINE__);
      }
      if (state == ncclSuccess) {
        if (!sync_stream) return;
        const cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) MPT_CUDA_CHECK(q);
      }
      if (bounded && clock::now() > deadline) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        char what[160];
        std::snprintf(what, sizeof(what), "NCCL collective %s of %zu elements did not complete within %g s", op,
                      elements, timeout_seconds());
        fatal_collective_failure(who_ + ": " + what +
                                 " (--collective-timeout): another rank has died, hangs, or called a different "
                                 "collective; stopping this rank");
      }
      // Spin briefly (small collectives finish in microseconds), then back off: the GPU and
      // NCCL's proxy thread progress without the host.
      if (polls < 1000) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  // This communicator's stream waits for the work enqueued so far on the compute stream. One
  // event suffices: a wait takes the event's state when it is enqueued, so re-recording it for
  // the next collective does not disturb this one.
  void after_compute() {
    MPT_CUDA_CHECK(cudaEventRecord(ready_, compute_));
    MPT_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
  }

  // In place: every rank's shard of data (part's elements of `type`, `bytes` each) to every
  // rank; NCCL's all-gather for even partitions, a group of per-root broadcasts for uneven ones.
  void all_gather_impl(void* data, const Partition& part, ncclDataType_t type, size_t bytes) {
    check(part, "all_gather");
    DeviceScope scope(device_);
    after_compute();
    char* base = static_cast<char*>(data);
    if (part.uniform()) {
      MPT_NCCL_CHECK(ncclAllGather(base + part.begin(rank()) * bytes, base, part.shard_size(), type, comm_, stream_));
    } else {
      MPT_NCCL_CHECK(ncclGroupStart());
      for (int r = 0; r < world_size(); ++r) {
        if (part.count(r) == 0) continue;
        char* p = base + part.begin(r) * bytes;
        MPT_NCCL_CHECK(ncclBroadcast(p, p, part.count(r), type, r, comm_, stream_));
      }
      MPT_NCCL_CHECK(ncclGroupEnd());
    }
    finish("all_gather", part.total());
  }

  void check(const Partition& part, const char* op) const {
    MPT_CHECK(part.world() == world_size(), std::string("[") + op + "] partition over " +
                                                std::to_string(part.world()) + " ranks, but the world has " +
                                                std::to_string(world_size()));
  }

  void check_root(int root, const char* op) const {
    MPT_CHECK(root >= 0 && root < world_size(), std::string("[") + op + "] root " + std::to_string(root) +
                                                    " is not a rank of a world of " + std::to_string(world_size()));
  }

  int device_;
  cudaStream_t compute_;  // the CUDA backend's stream (the legacy default stream without one)
  std::string who_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  double* scratch_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // the compute stream's progress (after_compute)
  size_t pending_ = 0;           // elements enqueued by reduce_range since the last wait
};

}  // namespace

bool nccl_compiled() { return true; }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, double timeout_s,
                                                     Backend* compute) {
  cudaStream_t compute_stream = cudaStreamLegacy;
  if (compute) {
    auto* gpu = dynamic_cast<cuda::CudaBackend*>(compute);
    MPT_CHECK(gpu != nullptr, std::string("NCCL communicator: the compute backend is '") + compute->name() +
                                  "', not a GPU's (NCCL moves device memory)");
    compute_stream = gpu->context().stream();
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" status
    devices = 0;
  }
  MPT_CHECK(devices > 0, "NCCL communicator: no CUDA device on this machine (rank " +
                             std::to_string(bootstrap.rank()) + ")");
  // One process per GPU: the local rank picks it (wrapping only if the launcher started more
  // ranks on a machine than it has GPUs, which NCCL then rejects with a clear error).
  const int device = bootstrap.local_rank() % devices;
  MPT_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id{};
  if (bootstrap.is_root()) MPT_NCCL_CHECK(ncclGetUniqueId(&id));
  bootstrap.broadcast(&id, sizeof(id), 0);
  Topology t = bootstrap.topology();
  auto comm = std::make_unique<NcclCommunicator>(t, timeout_s, device, compute_stream);
  comm->init(id);
  return comm;
}

}  // namespace mptrain
