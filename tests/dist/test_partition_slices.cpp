// slices_of (dist/communicator.h): where one range of a partitioned buffer goes when it is
// reduced on its own (the GPU step's overlapped ZeRO-1 reduction, one NCCL group per gradient
// range). The pieces are the range's intersections with the ranks' shards, in rank order; the
// ranges of a whole backward (ln_f, layers L-1..0, embeddings) give each rank exactly its shard.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"

namespace mptrain {
namespace {

TEST(PartitionSlices, RangeInsideOneShardGoesToItsRank) {
  const Partition part(1000, 4, 16);  // shards of 256: [0,256) [256,512) [512,768) [768,1000)
  const auto s = slices_of(part, 300, 400);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].rank, 1);
  EXPECT_EQ(s[0].begin, 300u);
  EXPECT_EQ(s[0].end, 400u);
}

TEST(PartitionSlices, RangeAcrossShardsIsCutAtTheirBounds) {
  const Partition part(1000, 4, 16);
  const auto s = slices_of(part, 200, 900);
  ASSERT_EQ(s.size(), 4u);
  const std::vector<std::pair<size_t, size_t>> want = {{200, 256}, {256, 512}, {512, 768}, {768, 900}};
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].rank, static_cast<int>(i));
    EXPECT_EQ(s[i].begin, want[i].first);
    EXPECT_EQ(s[i].end, want[i].second);
  }
}

TEST(PartitionSlices, EmptyRangesAndEmptyShardsGiveNoSlices) {
  EXPECT_TRUE(slices_of(Partition(1000, 4, 16), 500, 500).empty());
  // 40 elements over 4 ranks in shards of 16: rank 3 owns nothing and never appears.
  const auto s = slices_of(Partition(40, 4, 16), 0, 40);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s.back().rank, 2);
  EXPECT_EQ(s.back().end, 40u);
}

TEST(PartitionSlices, RangePastTheEndIsAnError) {
  EXPECT_THROW(slices_of(Partition(100, 2, 16), 50, 101), Error);
  EXPECT_THROW(slices_of(Partition(100, 2, 16), 60, 50), Error);
}

// A backward's ranges in their order (the last tensors first), cut like a GPT-2 table: every
// element goes to exactly one rank, and a rank's pieces together are its shard.
TEST(PartitionSlices, TheBackwardsRangesTileEveryShard) {
  const std::vector<size_t> bounds = {0, 7000, 7777, 12345, 16000, 16100};  // embeddings, layers, ln_f
  const size_t n = bounds.back();
  for (int world : {1, 2, 3, 8}) {
    const Partition part(n, world, 16);
    std::vector<size_t> owned(world, 0);
    std::vector<int> owner(n, -1);
    for (size_t r = bounds.size() - 1; r > 0; --r)
      for (const PartitionSlice& s : slices_of(part, bounds[r - 1], bounds[r])) {
        owned[s.rank] += s.end - s.begin;
        for (size_t i = s.begin; i < s.end; ++i) {
          ASSERT_EQ(owner[i], -1) << "element " << i << " sent twice";
          owner[i] = s.rank;
        }
      }
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(owned[r], part.count(r)) << "world " << world << " rank " << r;
      for (size_t i = part.begin(r); i < part.end(r); ++i) ASSERT_EQ(owner[i], r);
    }
  }
}

}  // namespace
}  // namespace mptrain
