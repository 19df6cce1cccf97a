// Pieces of src/dist that need no second process: partitions, the launcher's environment,
// the single-process communicator, and the collective watchdog (in a forked child).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/watchdog.h"

namespace mptrain {
namespace {

TEST(Partition, CoversTheBufferWithAlignedContiguousShards) {
  struct Case {
    size_t n;
    int world;
  };
  for (const Case c : {Case{0, 1}, Case{1, 1}, Case{37, 1}, Case{37, 2}, Case{64, 2}, Case{65, 2}, Case{100, 3},
                       Case{5, 4}, Case{1000003, 7}, Case{127, 8}}) {
    const Partition p(c.n, c.world);
    SCOPED_TRACE("n=" + std::to_string(c.n) + " world=" + std::to_string(c.world));
    EXPECT_EQ(p.total(), c.n);
    EXPECT_EQ(p.shard_size() % 16, 0u);
    size_t covered = 0;
    for (int r = 0; r < c.world; ++r) {
      EXPECT_EQ(p.begin(r), std::min(covered, c.n));
      EXPECT_LE(p.count(r), p.shard_size());
      if (p.end(r) < c.n) {
        EXPECT_EQ(p.count(r), p.shard_size());  // only the tail is short
      }
      covered = p.end(r);
    }
    EXPECT_EQ(covered, c.n);
    EXPECT_EQ(p.uniform(), p.shard_size() * c.world == c.n);
  }
  EXPECT_TRUE(Partition(64, 2).uniform());
  EXPECT_FALSE(Partition(37, 2).uniform());
  EXPECT_THROW(Partition(10, 0), Error);
}

Topology topology_of(const std::map<std::string, std::string>& env) {
  return topology_from_environment([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(Topology, ReadsEachLauncher) {
  Topology none = topology_of({});
  EXPECT_EQ(none.launcher, "none");
  EXPECT_EQ(none.world_size, 1);
  EXPECT_EQ(none.rank, 0);

  Topology ompi = topology_of(
      {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(ompi.launcher, "openmpi");
  EXPECT_EQ(ompi.world_size, 4);
  EXPECT_EQ(ompi.rank, 3);
  EXPECT_EQ(ompi.local_rank, 1);

  Topology pmi = topology_of({{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}, {"MPI_LOCALRANKID", "1"}});
  EXPECT_EQ(pmi.launcher, "pmi");
  EXPECT_EQ(pmi.world_size, 2);
  EXPECT_EQ(pmi.rank, 1);
  EXPECT_EQ(pmi.local_rank, 1);

  // srun: the step's task count wins over the allocation's.
  Topology slurm = topology_of({{"SLURM_NTASKS", "16"}, {"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_PROCID", "5"},
                                {"SLURM_LOCALID", "1"}});
  EXPECT_EQ(slurm.launcher, "slurm");
  EXPECT_EQ(slurm.world_size, 8);
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.local_rank, 1);
  Topology old_slurm = topology_of({{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "0"}});
  EXPECT_EQ(old_slurm.world_size, 2);
  EXPECT_EQ(old_slurm.local_rank, 0);

  // Open MPI's variables win when several launchers' are present (mpirun inside a Slurm job).
  Topology both = topology_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"},
                               {"SLURM_NTASKS", "1"}, {"SLURM_PROCID", "0"}});
  EXPECT_EQ(both.launcher, "openmpi");
  EXPECT_EQ(both.world_size, 2);
}

TEST(Topology, RejectsNonsense) {
  EXPECT_THROW(topology_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "2"}}), Error);
  EXPECT_THROW(topology_of({{"OMPI_COMM_WORLD_SIZE", "two"}, {"OMPI_COMM_WORLD_RANK", "0"}}), Error);
  EXPECT_THROW(topology_of({{"PMI_SIZE", "0"}, {"PMI_RANK", "0"}}), Error);
  EXPECT_THROW(topology_of({{"PMI_SIZE", "2"}, {"PMI_RANK", "-1"}}), Error);
}

TEST(SingleCommunicator, IsRankZeroOfOneAndLeavesDataAlone) {
  auto c = make_single_communicator();
  EXPECT_STREQ(c->backend(), "single");
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->world_size(), 1);
  EXPECT_TRUE(c->is_root());
  std::vector<float> v = {1.5f, -2.0f, 3.25f};
  c->all_reduce(v.data(), v.size(), ReduceOp::Sum);
  c->all_reduce(v.data(), v.size(), ReduceOp::Avg);
  const Partition p(v.size(), 1);
  c->reduce_scatter(v.data(), p, ReduceOp::Avg);
  c->all_gather(v.data(), p);
  EXPECT_EQ(v, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  std::vector<float> whole(3, 0.0f);
  c->gather(whole.data(), v.data(), p, 0);
  EXPECT_EQ(whole, v);
  EXPECT_DOUBLE_EQ(c->sum(2.5), 2.5);
  EXPECT_TRUE(c->any(true));
  EXPECT_FALSE(c->any(false));
  c->barrier();
  EXPECT_THROW(c->reduce_scatter(v.data(), Partition(3, 2), ReduceOp::Sum), Error);
  EXPECT_THROW(c->broadcast(v.data(), 4, 1), Error);
}

TEST(HostCommunicator, WithoutALauncherIsTheSingleProcessOne) {
  if (topology_from_environment().world_size > 1) GTEST_SKIP() << "running under a launcher";
  auto c = make_host_communicator(10.0);
  EXPECT_STREQ(c->backend(), "single");
}

TEST(CollectiveWatchdog, DisarmedInTimeItStaysQuiet) {
  CollectiveWatchdog dog(0.2, "rank 0 of 1");
  for (int i = 0; i < 100; ++i) {
    auto armed = dog.arm("all_reduce", 10);
  }
  {
    auto armed = dog.arm("barrier", 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past every deadline, nothing armed
  SUCCEED();
}

TEST(CollectiveWatchdog, DisabledWithAZeroTimeout) {
  CollectiveWatchdog dog(0.0, "rank 0 of 1");
  auto armed = dog.arm("barrier", 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  SUCCEED();
}

TEST(CollectiveWatchdogDeathTest, EndsTheProcessWithAMessageWhenACollectiveOverstays) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EXIT(
      {
        CollectiveWatchdog dog(0.3, "rank 1 of 2");
        auto armed = dog.arm("reduce_scatter", 1234);
        std::this_thread::sleep_for(std::chrono::seconds(30));  // a peer that never answers
      },
      ::testing::ExitedWithCode(1),
      "mptrain: error: rank 1 of 2: collective reduce_scatter of 1234 elements did not complete within 0.3 s "
      "\\(--collective-timeout\\)");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(s, 10.0);
}

}  // namespace
}  // namespace mptrain
