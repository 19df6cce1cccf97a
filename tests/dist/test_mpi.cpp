// The MPI communicator on real ranks: MpiCollectives.* start this test executable under
// mpirun (2 and 3 ranks, loopback) running only MpiWorker.*, which checks every collective
// against values each rank can compute for itself. Run directly, MpiWorker.* skip.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "dist/communicator.h"
#include "dist/mpi_communicator.h"
#include "dist/dist_test_util.h"

namespace mptrain {
namespace {

using testing::have_mpirun;
using testing::mpirun;
using testing::run_command;
using testing::self_executable;

// One communicator per process (MPI initialises once), finalised at exit.
Communicator& worker_comm() {
  static std::unique_ptr<Communicator> comm = make_host_communicator(60.0);
  return *comm;
}

bool under_launcher() { return topology_from_environment().world_size > 1; }

// What rank r holds at index i before a reduction: distinct per rank, exactly representable.
float value(int r, size_t i) { return static_cast<float>(r + 1) * 0.5f + static_cast<float>(i % 97); }

TEST(MpiWorker, AllReduce) {
  if (!under_launcher()) GTEST_SKIP() << "runs under mpirun (MpiCollectives.*)";
  Communicator& c = worker_comm();
  EXPECT_STREQ(c.backend(), "mpi");
  const int W = c.world_size(), R = c.rank();
  for (size_t n : {size_t{1}, size_t{37}, size_t{100000}}) {
    std::vector<float> f(n);
    std::vector<double> d(n);
    for (size_t i = 0; i < n; ++i) f[i] = value(R, i), d[i] = value(R, i);
    c.all_reduce(f.data(), n, ReduceOp::Sum);
    c.all_reduce(d.data(), n, ReduceOp::Avg);
    for (size_t i = 0; i < n; ++i) {
      double sum = 0.0;
      for (int r = 0; r < W; ++r) sum += value(r, i);
      ASSERT_EQ(f[i], static_cast<float>(sum)) << i;
      ASSERT_DOUBLE_EQ(d[i], sum / W) << i;
    }
  }
  EXPECT_DOUBLE_EQ(c.sum(R + 1.0), W * (W + 1) / 2.0);
  EXPECT_TRUE(c.any(R == W - 1));
  EXPECT_FALSE(c.any(false));
  EXPECT_FALSE(c.all(R == 0));
}

TEST(MpiWorker, ReduceScatterAndAllGather) {
  if (!under_launcher()) GTEST_SKIP() << "runs under mpirun (MpiCollectives.*)";
  Communicator& c = worker_comm();
  const int W = c.world_size(), R = c.rank();
  // Uneven (tail shorter, possibly empty) and even partitions.
  for (size_t n : {size_t{5}, size_t{37}, size_t{16} * W, size_t{100003}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const Partition p(n, W);
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = value(R, i);
    c.reduce_scatter(g.data(), p, ReduceOp::Avg);
    for (size_t i = p.begin(R); i < p.end(R); ++i) {
      double sum = 0.0;
      for (int r = 0; r < W; ++r) sum += value(r, i);
      ASSERT_EQ(g[i], static_cast<float>(sum / W)) << i;
    }
    // Each rank writes a rank-specific value into its shard; all_gather makes the whole.
    std::vector<float> w(n, -1.0f);
    for (size_t i = p.begin(R); i < p.end(R); ++i) w[i] = static_cast<float>(R * 1000) + static_cast<float>(i % 13);
    c.all_gather(w.data(), p);
    for (int r = 0; r < W; ++r)
      for (size_t i = p.begin(r); i < p.end(r); ++i)
        ASSERT_EQ(w[i], static_cast<float>(r * 1000) + static_cast<float>(i % 13)) << i;
    // The 16-bit all-gather over the same partition: each rank's bit patterns (sign bit set,
    // rank in bits 11+) arrive unchanged; the fill 0x7fc1 (a NaN in bf16 and fp16) shows a gap.
    std::vector<std::uint16_t> h(n, 0x7fc1);
    const auto bits = [](int r, size_t i) {
      return static_cast<std::uint16_t>(0x8000u | (static_cast<unsigned>(r) << 11) | (i % 2039));
    };
    for (size_t i = p.begin(R); i < p.end(R); ++i) h[i] = bits(R, i);
    c.all_gather(h.data(), p);
    for (int r = 0; r < W; ++r)
      for (size_t i = p.begin(r); i < p.end(r); ++i) ASSERT_EQ(h[i], bits(r, i)) << "16-bit, i=" << i;
  }
}

// reduce onto one rank, and reduce_range (the overlapped gradient reduction): a buffer cut into
// ranges that do not follow the shards, each reduced on its own, ends as the whole-buffer
// collective leaves it: every element on every rank (all-reduce), or each shard on its rank.
TEST(MpiWorker, ReduceAndReduceRange) {
  if (!under_launcher()) GTEST_SKIP() << "runs under mpirun (MpiCollectives.*)";
  Communicator& c = worker_comm();
  const int W = c.world_size(), R = c.rank();
  const auto mean = [W](size_t i) {
    double sum = 0.0;
    for (int r = 0; r < W; ++r) sum += value(r, i);
    return static_cast<float>(sum / W);
  };
  for (size_t n : {size_t{37}, size_t{100003}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = value(R, i);
    c.reduce(g.data(), n, ReduceOp::Avg, W - 1);
    if (R == W - 1) {
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(g[i], mean(i)) << i;
    }
    const Partition p(n, W);
    for (const Partition* part : {static_cast<const Partition*>(nullptr), &p}) {
      for (size_t i = 0; i < n; ++i) g[i] = value(R, i);
      // Backwards, as a backward pass hands its ranges: [2n/3, n), [n/3, 2n/3), [0, n/3).
      for (int k = 2; k >= 0; --k) c.reduce_range(g.data(), n * k / 3, n * (k + 1) / 3, part, ReduceOp::Avg);
      c.wait_reductions();
      const size_t lo = part ? p.begin(R) : 0, hi = part ? p.end(R) : n;
      for (size_t i = lo; i < hi; ++i) ASSERT_EQ(g[i], mean(i)) << (part ? "ZeRO-1, " : "all-reduce, ") << i;
    }
  }
}

TEST(MpiWorker, GatherBroadcastBarrier) {
  if (!under_launcher()) GTEST_SKIP() << "runs under mpirun (MpiCollectives.*)";
  Communicator& c = worker_comm();
  const int W = c.world_size(), R = c.rank();
  const size_t n = 53;
  const Partition p(n, W);
  for (int root = 0; root < W; ++root) {
    for (bool in_place : {true, false}) {
      std::vector<float> shard(p.count(R));
      for (size_t k = 0; k < shard.size(); ++k) shard[k] = static_cast<float>(R) + 0.25f * static_cast<float>(k);
      std::vector<float> whole(n, -7.0f);
      // An empty shard's data() may be null, and memcpy's pointers must not be, even for 0 bytes.
      if (R == root && in_place && !shard.empty())
        std::memcpy(whole.data() + p.begin(R), shard.data(), shard.size() * sizeof(float));
      const float* send = R == root && in_place ? whole.data() + p.begin(R) : shard.data();
      c.gather(R == root ? whole.data() : nullptr, send, p, root);
      if (R == root) {
        for (int r = 0; r < W; ++r)
          for (size_t i = p.begin(r); i < p.end(r); ++i)
            ASSERT_EQ(whole[i], static_cast<float>(r) + 0.25f * static_cast<float>(i - p.begin(r)));
      }
    }
  }
  char text[32] = {};
  if (R == W - 1) std::strcpy(text, "from the last rank");
  c.broadcast(text, sizeof(text), W - 1);
  EXPECT_STREQ(text, "from the last rank");
  c.barrier();
}

std::string run_workers(int ranks) {
  auto r = run_command(mpirun(ranks) + " " + self_executable() + " --gtest_color=no --gtest_filter='MpiWorker.*'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

TEST(MpiCollectives, TwoRanks) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (scripts/setup.sh installs Open MPI)";
  const std::string out = run_workers(2);
  size_t passed = 0;
  for (size_t at = out.find("[  PASSED  ] 4 tests"); at != std::string::npos;
       at = out.find("[  PASSED  ] 4 tests", at + 1))
    ++passed;
  EXPECT_EQ(passed, 2u) << out;
}

TEST(MpiCollectives, ThreeRanks) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (scripts/setup.sh installs Open MPI)";
  const std::string out = run_workers(3);
  EXPECT_EQ(out.find("FAILED"), std::string::npos) << out;
}

}  // namespace
}  // namespace mptrain
