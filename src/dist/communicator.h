// The collective operations data-parallel training needs, behind one interface with
// three implementations: a single process (every call a no-op), MPI for CPU ranks
// (mpi_communicator.h) and NCCL for GPU ranks (nccl_communicator.h, bootstrapped over MPI).
//
// Contracts shared by every implementation:
//  - Every rank calls the same collectives in the same order with the same sizes.
//  - Calls are synchronous: when one returns, its result is in place.
//  - Buffers live where the implementation computes: host memory for "single" and "mpi",
//    device memory for "nccl" (broadcast included; the NCCL communicator's bootstrap
//    communicator moves host bytes).
//  - A collective that does not complete within the collective timeout (a rank died, hangs
//    or called another collective) ends this process with one clear message on stderr and
//    exit status 1; the launcher then tears the job down. It cannot be an exception: the
//    collective still owns the buffers that unwinding would free.
//  - Sharded operations (reduce_scatter, all_gather, gather) work in place on a buffer laid
//    out as a whole, split by a Partition into one contiguous shard per rank.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/named.h"

namespace mptrain {

enum class ReduceOp { Sum, Avg };

// What the gradients are reduced over between ranks (--dist-backend): MPI, NCCL between GPU
// ranks, or auto (NCCL for several GPU ranks, else MPI).
enum class DistBackend { Auto, Mpi, Nccl };
inline constexpr NameTable<DistBackend, 3> kDistBackendNames{
    {{DistBackend::Auto, "auto"}, {DistBackend::Mpi, "mpi"}, {DistBackend::Nccl, "nccl"}}};
inline DistBackend parse_dist_backend(std::string_view name) {
  return parse_in(kDistBackendNames, name, "--dist-backend");
}
inline const char* dist_backend_name(DistBackend b) { return name_in(kDistBackendNames, b); }

// n elements split into world contiguous shards: rank r owns [begin(r), end(r)). The even split
// gives every shard but the last non-empty one the same size, a multiple of `align` (so shards
// start on 64-byte boundaries for align = 16 floats); trailing shards may be shorter or empty.
// Explicit boundaries give any contiguous split (Muon's: cuts only between whole matrices).
class Partition {
 public:
  Partition() = default;
  Partition(size_t n, int world, size_t align = 16);
  // bounds[r] = begin(r); bounds has world + 1 entries, from 0 up to n, non-decreasing (Error
  // otherwise).
  explicit Partition(std::vector<size_t> bounds);

  size_t total() const { return bounds_.back(); }
  int world() const { return static_cast<int>(bounds_.size()) - 1; }
  size_t shard_size() const { return shard_; }  // the largest shard
  size_t begin(int rank) const { return bounds_[static_cast<size_t>(rank)]; }
  size_t end(int rank) const { return bounds_[static_cast<size_t>(rank) + 1]; }
  size_t count(int rank) const { return end(rank) - begin(rank); }
  // True when every shard holds exactly shard_size() elements (n == world·shard_size()).
  bool uniform() const { return shard_ * static_cast<size_t>(world()) == total(); }
  bool operator==(const Partition&) const = default;

 private:
  std::vector<size_t> bounds_{0, 0};
  size_t shard_ = 0;
};

// The even split of n over world ranks (as Partition(n, world, align)), with each cut that
// falls strictly inside one of the `whole` ranges moved to the nearer end of it: shards of about
// equal size that hold each of those ranges whole (Muon's matrices under ZeRO-1).
Partition partition_keeping_whole(size_t n, int world, const std::vector<std::pair<size_t, size_t>>& whole,
                                  size_t align = 16);

// The pieces of [begin, end) that fall in each rank's shard, in rank order, empty ones left
// out: where one range of the buffer goes when it is reduced on its own (a layer's gradients
// under ZeRO-1, as soon as the backward has made them final). Throws Error past total().
struct PartitionSlice {
  int rank = 0;
  size_t begin = 0, end = 0;
};
std::vector<PartitionSlice> slices_of(const Partition& part, size_t begin, size_t end);

// Where this process sits in the job, as the launcher describes it.
struct Topology {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // index among the ranks on this machine (picks the GPU)
  std::string launcher;      // "none", "openmpi", "pmi", "slurm"
};

// Reads the launcher's environment: Open MPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK), PMI
// launchers such as MPICH's Hydra (PMI_RANK/PMI_SIZE, MPI_LOCALRANKID), Slurm's srun
// (SLURM_PROCID, SLURM_STEP_NUM_TASKS or SLURM_NTASKS, SLURM_LOCALID), in that order of
// preference. Without any, a single process. getenv is a parameter so tests can feed their own.
// Throws Error for values that do not parse or do not fit (rank >= world size).
Topology topology_from_environment(const std::function<const char*(const char*)>& getenv_fn);
Topology topology_from_environment();

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // "single", "mpi", "nccl".
  virtual const char* backend() const = 0;
  int rank() const { return topology_.rank; }
  int world_size() const { return topology_.world_size; }
  int local_rank() const { return topology_.local_rank; }
  bool is_root() const { return topology_.rank == 0; }
  const Topology& topology() const { return topology_; }
  // Seconds a collective may take before the job is stopped (<= 0: wait forever).
  double timeout_seconds() const { return timeout_s_; }

  // data[0, n) ← the sum (or mean) of every rank's data[0, n). Every rank gets the same bits.
  virtual void all_reduce(float* data, size_t n, ReduceOp op) = 0;
  virtual void all_reduce(double* data, size_t n, ReduceOp op) = 0;
  // data holds part.total() elements on every rank. Afterwards data[part.begin(rank),
  // part.end(rank)) holds the sum (or mean) over ranks of that range; the rest of data is
  // unspecified (implementations may use it as scratch).
  virtual void reduce_scatter(float* data, const Partition& part, ReduceOp op) = 0;
  // data holds part.total() elements; each rank's own shard is sent to every rank, so that
  // afterwards every rank's data is whole.
  virtual void all_gather(float* data, const Partition& part) = 0;
  // The same for 16-bit values (bf16 or fp16, moved as bits: no arithmetic happens), the
  // partition in elements: the GPU's ZeRO-1 gathers the updated 16-bit parameter copy.
  virtual void all_gather(std::uint16_t* data, const Partition& part) = 0;
  // On root, data (part.total() elements) receives every rank's shard; other ranks pass their
  // own shard (part.count(rank) elements) as `shard` and may pass data = nullptr. On root,
  // `shard` may be data + part.begin(root) (already in place) or another buffer.
  virtual void gather(float* data, const float* shard, const Partition& part, int root) = 0;
  // data[0, n) on root ← the sum (or mean) of every rank's data[0, n); other ranks' data is
  // left unspecified (implementations may use it as scratch).
  virtual void reduce(float* data, size_t n, ReduceOp op, int root) = 0;
  // bytes from root to every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;

  // The reduction of one range as soon as the backward has made it final (data parallelism's
  // gradient-ready hook, dist/data_parallel.h): data[begin, end) to every rank (part null: an
  // all-reduce), or each piece to the rank whose shard of *part holds it (ZeRO-1, slices_of).
  // An asynchronous communicator (NCCL) enqueues it behind the compute backend's work and
  // returns; the host ones reduce at once (the CPU backend's work is done when the hook runs).
  // wait_reductions() returns when every range started since the last wait has been reduced.
  virtual void reduce_range(float* data, size_t begin, size_t end, const Partition* part, ReduceOp op);
  virtual void wait_reductions() {}
  // Whether the buffers of collectives are device memory (NCCL) rather than host memory.
  virtual bool device_buffers() const { return false; }

  // Host scalars reduced over ranks (device communicators stage them through device memory).
  virtual double sum(double x);   // the sum over ranks of x
  virtual bool any(bool flag);    // true if any rank passed true
  bool all(bool flag) { return !any(!flag); }

 protected:
  Communicator(const Topology& topology, double timeout_s) : topology_(topology), timeout_s_(timeout_s) {}

 private:
  Topology topology_;
  double timeout_s_;
};

// The communicator for this process's launcher: MPI when the environment names a world of
// more than one rank (initialising MPI), else the single-process one (MPI untouched, so a
// plain `mptrain train` needs no mpirun). timeout_s: see timeout_seconds().
std::unique_ptr<Communicator> make_host_communicator(double timeout_s);

// The single-process communicator: rank 0 of 1; every collective leaves data as it is.
std::unique_ptr<Communicator> make_single_communicator();

}  // namespace mptrain
