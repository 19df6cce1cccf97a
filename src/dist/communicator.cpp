// Partitions, the launcher's environment, the single-process communicator and the choice
// between it and MPI.
#include "dist/communicator.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "dist/mpi_communicator.h"

namespace mptrain {

Partition::Partition(size_t n, int world, size_t align) {
  MPT_CHECK(world > 0, "[partition] world size must be positive, got " + std::to_string(world));
  MPT_CHECK(align > 0, "[partition] alignment must be positive");
  const size_t w = static_cast<size_t>(world);
  const size_t per_rank = (n + w - 1) / w;
  shard_ = (per_rank + align - 1) / align * align;
  bounds_.resize(w + 1);
  for (size_t r = 0; r <= w; ++r) bounds_[r] = std::min(n, shard_ * r);
}

Partition::Partition(std::vector<size_t> bounds) : bounds_(std::move(bounds)) {
  MPT_CHECK(bounds_.size() >= 2 && bounds_.front() == 0,
            "[partition] boundaries must start at 0 and name at least one shard");
  for (size_t r = 1; r < bounds_.size(); ++r) {
    MPT_CHECK(bounds_[r] >= bounds_[r - 1], "[partition] boundaries must not decrease");
    shard_ = std::max(shard_, bounds_[r] - bounds_[r - 1]);
  }
}

Partition partition_keeping_whole(size_t n, int world, const std::vector<std::pair<size_t, size_t>>& whole,
                                  size_t align) {
  const Partition even(n, world, align);
  std::vector<size_t> bounds{0};
  for (int r = 1; r < world; ++r) {
    size_t cut = even.begin(r);
    for (const auto& [lo, hi] : whole)
      if (lo < cut && cut < hi) cut = cut - lo <= hi - cut ? lo : hi;
    bounds.push_back(std::max(cut, bounds.back()));
  }
  bounds.push_back(n);
  return Partition(std::move(bounds));
}

std::vector<PartitionSlice> slices_of(const Partition& part, size_t begin, size_t end) {
  MPT_CHECK(begin <= end && end <= part.total(), "[partition] range [" + std::to_string(begin) + ", " +
                                                    std::to_string(end) + ") is not within the " +
                                                    std::to_string(part.total()) + " partitioned elements");
  std::vector<PartitionSlice> out;
  for (int r = 0; r < part.world(); ++r) {
    const size_t lo = std::max(begin, part.begin(r)), hi = std::min(end, part.end(r));
    if (lo < hi) out.push_back({r, lo, hi});
  }
  return out;
}

namespace {

int parse_env_int(const char* name, const char* value) {
  int out = 0;
  const char* last = value + std::strlen(value);
  auto [ptr, ec] = std::from_chars(value, last, out);
  if (ec != std::errc() || ptr != last || out < 0)
    throw Error(std::string("launcher environment: ") + name + "='" + value + "' is not a non-negative integer");
  return out;
}

// One launcher's variable names: world size, rank, local rank (may be null).
struct LauncherVars {
  const char* launcher;
  const char* size;
  const char* rank;
  const char* local_rank;
};

}  // namespace

Topology topology_from_environment(const std::function<const char*(const char*)>& getenv_fn) {
  // srun sets SLURM_STEP_NUM_TASKS for the step it launches; SLURM_NTASKS (the allocation's
  // task count) is the fallback for older versions.
  const char* slurm_size = getenv_fn("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  const LauncherVars launchers[] = {
      {"openmpi", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"pmi", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID"},
      {"slurm", slurm_size, "SLURM_PROCID", "SLURM_LOCALID"},
  };
  for (const auto& l : launchers) {
    const char* size = getenv_fn(l.size);
    const char* rank = getenv_fn(l.rank);
    if (!size || !rank) continue;
    Topology t;
    t.launcher = l.launcher;
    t.world_size = parse_env_int(l.size, size);
    t.rank = parse_env_int(l.rank, rank);
    const char* local = l.local_rank ? getenv_fn(l.local_rank) : nullptr;
    t.local_rank = local ? parse_env_int(l.local_rank, local) : 0;
    if (t.world_size < 1 || t.rank >= t.world_size)
      throw Error(std::string("launcher environment (") + l.launcher + "): rank " + std::to_string(t.rank) +
                  " does not fit a world of " + std::to_string(t.world_size) + " ranks");
    return t;
  }
  Topology t;
  t.launcher = "none";
  return t;
}

Topology topology_from_environment() {
  return topology_from_environment([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

void Communicator::reduce_range(float* data, size_t begin, size_t end, const Partition* part, ReduceOp op) {
  if (!part) return all_reduce(data + begin, end - begin, op);
  for (const PartitionSlice& s : slices_of(*part, begin, end))
    reduce(data + s.begin, s.end - s.begin, op, s.rank);
}

double Communicator::sum(double x) {
  all_reduce(&x, 1, ReduceOp::Sum);
  return x;
}

bool Communicator::any(bool flag) {
  double v = flag ? 1.0 : 0.0;
  all_reduce(&v, 1, ReduceOp::Sum);
  return v > 0.0;
}

namespace {

class SingleCommunicator final : public Communicator {
 public:
  SingleCommunicator() : Communicator(Topology{0, 1, 0, "none"}, 0.0) {}
  const char* backend() const override { return "single"; }
  void all_reduce(float*, size_t, ReduceOp) override {}
  void all_reduce(double*, size_t, ReduceOp) override {}
  void reduce_scatter(float*, const Partition& part, ReduceOp) override { check(part); }
  void all_gather(float*, const Partition& part) override { check(part); }
  void all_gather(std::uint16_t*, const Partition& part) override { check(part); }
  void gather(float* data, const float* shard, const Partition& part, int root) override {
    check(part);
    MPT_CHECK(root == 0, "[gather] root " + std::to_string(root) + " is not a rank of a single process");
    if (shard != data && part.total() > 0) std::memmove(data, shard, part.total() * sizeof(float));
  }
  void reduce(float*, size_t, ReduceOp, int root) override {
    MPT_CHECK(root == 0, "[reduce] root " + std::to_string(root) + " is not a rank of a single process");
  }
  void broadcast(void*, size_t, int root) override {
    MPT_CHECK(root == 0, "[broadcast] root " + std::to_string(root) + " is not a rank of a single process");
  }
  void barrier() override {}

 private:
  static void check(const Partition& part) {
    MPT_CHECK(part.world() == 1, "[collective] a partition over " + std::to_string(part.world()) +
                                     " ranks used with a single-process communicator");
  }
};

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() { return std::make_unique<SingleCommunicator>(); }

std::unique_ptr<Communicator> make_host_communicator(double timeout_s) {
  const Topology t = topology_from_environment();
  if (t.world_size > 1) return make_mpi_communicator(t, timeout_s);
  return make_single_communicator();
}

}  // namespace mptrain
