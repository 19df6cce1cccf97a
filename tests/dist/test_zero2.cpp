// --zero 2 (dist/data_parallel.h) as a user runs it: `mpirun -np 2 mptrain train ... --zero 2` on
// this machine (CPU ranks, loopback), against --zero 1 on the same ranks.
//   - One micro-batch per rank: the same bits as ZeRO-1 (each range's reduction adds the same
//     two values), losses, parameters and optimizer state, with AdamW and with Sophia (whose
//     curvature pass is one more backward reduced range by range), under the GPU's plan, and with
//     the passes replayed from a graph (the ranges handed after each replay).
//   - Two micro-batches per rank: each is reduced over the ranks before the next is added, so
//     the sums are ordered differently: within fp32 rounding (the tolerances of
//     test_data_parallel.cpp).
//   - Its checkpoints are whole (rank 0 writes the gathered state): a resume on two ZeRO-2 ranks
//     continues bit for bit, on one rank within rounding.
//   - Its memory: what a rank holds of the gradients (memory_estimate.h's zero2_gradient_floats).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/param_table.h"
#include "dist/communicator.h"
#include "dist/dist_test_util.h"
#include "model/gpt2.h"
#include "train/memory_estimate.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::expect_losses_close;
using testing::expect_parameters_close;
using testing::read_losses;
using testing::run_command;
using testing::TempDir;
using testing::train;

// Global batch `total` tokens of 2 x 32 windows per micro-batch: 128 is one micro-batch per rank
// on two ranks, 256 two.
std::string args(const std::string& data, const std::string& run_dir, int total) {
  return "train --preset d2 --device cpu --train-data '" + data + "/train_*.bin' --val-data '" + data +
         "/val_*.bin' --batch 2 --seq 32 --total-batch " + std::to_string(total) +
         " --lr 3e-3 --warmup 2 --val-steps 2 --sample-tokens 4 --threads 1 --deterministic --seed 5 "
         "--run-dir " +
         run_dir;
}

void expect_same_files(const std::string& a, const std::string& b) {
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    const auto same = run_command("cmp " + a + "/" + file + " " + b + "/" + file);
    EXPECT_EQ(same.exit_code, 0) << file << ": " << same.output;
  }
}

class Zero2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed (scripts/setup.sh installs Open MPI)";
    testing::write_small_shards(tmp_.path());
  }
  TempDir tmp_;
};

TEST_F(Zero2, OneMicroBatchPerRankHasTheBitsOfZero1) {
  const std::string& d = tmp_.path();
  for (const std::string extra :
       {"", " --optimizer sophia --sophia-k 2", " --precision bf16 --policy-of cuda",
        " --precision bf16 --policy-of cuda --graphs on"}) {
    SCOPED_TRACE(extra);
    const std::string one = tmp_ / ("one" + std::to_string(extra.size())),
                      two = tmp_ / ("two" + std::to_string(extra.size()));
    auto z1 = train(2, args(d, one, 128) + " --steps 6 --zero 1" + extra);
    ASSERT_EQ(z1.exit_code, 0) << z1.output;
    auto z2 = train(2, args(d, two, 128) + " --steps 6 --zero 2" + extra);
    ASSERT_EQ(z2.exit_code, 0) << z2.output;
    EXPECT_NE(z2.output.find("ZeRO-2: gradients and optimizer state sharded, gradients reduced "),
              std::string::npos)
        << z2.output;
    const auto l1 = read_losses(one), l2 = read_losses(two);
    ASSERT_EQ(l1.size(), 6u);
    EXPECT_EQ(l2, l1);
    expect_same_files(one + "/step_00000006", two + "/step_00000006");
  }
}

TEST_F(Zero2, AccumulatesMicroBatchesWithinRoundingOfZero1) {
  const std::string& d = tmp_.path();
  auto z1 = train(2, args(d, tmp_ / "one", 256) + " --steps 12 --zero 1");
  ASSERT_EQ(z1.exit_code, 0) << z1.output;
  auto z2 = train(2, args(d, tmp_ / "two", 256) + " --steps 12 --zero 2");
  ASSERT_EQ(z2.exit_code, 0) << z2.output;
  EXPECT_NE(z2.output.find("2 accumulation step(s) = 256 tokens/step"), std::string::npos) << z2.output;
  const auto l1 = read_losses(tmp_ / "one"), l2 = read_losses(tmp_ / "two");
  ASSERT_EQ(l1.size(), 12u);
  EXPECT_LT(l2.back().second, l2.front().second - 1.0);  // it learns
  expect_losses_close(l2, l1, 1e-6);
  expect_parameters_close(tmp_ / "two/step_00000012", tmp_ / "one/step_00000012");
}

TEST_F(Zero2, CheckpointResumesOnTwoRanksBitForBitAndOnOne) {
  const std::string& d = tmp_.path();
  const std::string full = tmp_ / "full";
  auto a = train(2, args(d, full, 256) + " --steps 12 --save-every 6 --zero 2");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const std::string from = full + "/step_00000006";
  // Two ranks, ZeRO-2 again: the uninterrupted run's bits.
  auto b = train(2, args(d, tmp_ / "two", 256) + " --steps 12 --zero 2 --resume " + from);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto lf = read_losses(full), l2 = read_losses(tmp_ / "two");
  ASSERT_EQ(lf.size(), 12u);
  ASSERT_EQ(l2.size(), 6u);
  EXPECT_EQ(l2, std::vector(lf.begin() + 6, lf.end()));
  expect_same_files(full + "/step_00000012", tmp_ / "two/step_00000012");
  // Two ranks under ZeRO-1 and one rank with twice the accumulation: the same run within rounding.
  for (const auto& [ranks, zero] : {std::pair{2, " --zero 1"}, std::pair{1, ""}}) {
    const std::string dir = tmp_ / ("r" + std::to_string(ranks));
    auto c = train(ranks, args(d, dir, 256) + " --steps 12 --resume " + from + zero);
    ASSERT_EQ(c.exit_code, 0) << c.output;
    expect_losses_close(read_losses(dir), std::vector(lf.begin() + 6, lf.end()), 1e-6);
    expect_parameters_close(dir + "/step_00000012", full + "/step_00000012");
  }
}

TEST_F(Zero2, OneRankHasNothingToShardOver) {
  expect_clear_error(train(1, args(tmp_.path(), tmp_ / "single", 128) + " --steps 1 --zero 2"),
                     "--zero 2 shards the gradients over ranks, and this run has one");
  expect_clear_error(train(1, args(tmp_.path(), tmp_ / "three", 128) + " --steps 1 --zero 3"), "--zero");
  expect_clear_error(
      train(1, args(tmp_.path(), tmp_ / "off", 128) + " --steps 1 --zero 2 --overlap-grad-reduce off"),
      "--overlap-grad-reduce off does not go with it");
}

// What a rank holds: its shard, the largest group of gradients (GPT-2's embeddings, which the
// tied LM head writes first and the embedding backward last) where another rank owns it, and one
// block at a time of the others'.
TEST(Zero2Memory, ARankHoldsItsShardTheOpenEmbeddingsAndOneBlock) {
  for (const char* preset : {"d2", "gpt2"}) {
    SCOPED_TRACE(preset);
    const ParamTable table = gpt2_param_table(gpt2_preset(preset));
    const std::vector<ParamRange> groups = gradient_groups(table);
    // wte + wpe, each block, ln_f.
    const size_t layers = std::string(preset) == "d2" ? 2 : 12;
    ASSERT_EQ(groups.size(), layers + 2);
    EXPECT_EQ(groups[0].begin, 0u);
    EXPECT_EQ(groups[0].end, table.range("h.0.").begin);
    EXPECT_EQ(groups[1].begin, table.range("h.0.").begin);
    EXPECT_EQ(groups[1].end, table.range("h.0.").end);
    EXPECT_EQ(groups.back().begin, table.range("ln_f.").begin);
    EXPECT_EQ(groups.back().end, table.total());
    const size_t n = table.total(), block = groups[1].size(), embeddings = groups[0].size();
    const Partition two(n, 2);
    if (embeddings > two.count(0)) {
      // d2: the embeddings are most of the model and cross the cut. Rank 0 holds all of them and
      // one block of rank 1's; rank 1 all of them too, and so everything.
      EXPECT_EQ(zero2_gradient_floats(groups, two, 0), embeddings + block);
      EXPECT_EQ(zero2_gradient_floats(groups, two, 1), n);
    } else {
      // GPT-2 124M: rank 0 owns the embeddings, and holds its shard and one of rank 1's blocks;
      // rank 1 its shard, the embeddings (rank 0's) and one of rank 0's blocks.
      EXPECT_EQ(zero2_gradient_floats(groups, two, 0), two.count(0) + block);
      EXPECT_EQ(zero2_gradient_floats(groups, two, 1), two.count(1) + embeddings + block);
    }
    // One rank owns everything: nothing of another's.
    EXPECT_EQ(zero2_gradient_floats(groups, Partition(n, 1), 0), n);
  }
}

// A number after `key` in `text`, in MiB as explain prints it, as bytes (0 when missing).
size_t mib_after(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  return at == std::string::npos
             ? 0
             : static_cast<size_t>(std::stod(text.substr(at + key.size())) * 1024.0 * 1024.0);
}

// The estimate holds per rank: each rank's peak resident memory under ZeRO-1 and ZeRO-2 is within
// 10% of what `explain --ranks 2 --zero Z` says for it (rank 0 with the optimizer state it gathers
// for the checkpoint; under ZeRO-2 each rank's shard and open gradients).
TEST_F(Zero2, EachRanksPeakResidentStaysWithinTenPercentOfExplain) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "under AddressSanitizer the resident set holds its shadow memory";
#endif
  // Each rank's own peak (getrusage of the child it runs), with its rank.
  const std::string peak_of_rank =
      "python3 -c 'import os, resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
      "print(\"rank\", os.environ[\"OMPI_COMM_WORLD_RANK\"], \"maxrss\", "
      "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' ";
  const std::string shape = "--preset d6 --batch 4 --seq 256";
  for (const int zero : {1, 2}) {
    SCOPED_TRACE("--zero " + std::to_string(zero));
    const auto e = testing::run_mptrain("explain " + shape + " --ranks 2 --zero " + std::to_string(zero));
    ASSERT_EQ(e.exit_code, 0) << e.output;
    const size_t rank0 = mib_after(e.output, "  peak resident (measured)");
    const size_t rank1 =
        mib_after(e.output.substr(e.output.find("rank 1: gradients")), "peak resident (measured)");
    const std::string dir = tmp_ / ("z" + std::to_string(zero));
    const auto r = run_command(testing::mpirun(2) + " " + peak_of_rank + MPTRAIN_BINARY + " " + "train " +
                               shape + " --total-batch 2048 --train-data '" + tmp_.path() +
                               "/train_*.bin' --steps 2 --threads 1 --quiet --sample-tokens 1 --zero " +
                               std::to_string(zero) + " --run-dir " + dir);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (int rank = 0; rank < 2; ++rank) {
      const std::string key = "rank " + std::to_string(rank) + " maxrss ";
      const size_t at = r.output.find(key);
      ASSERT_NE(at, std::string::npos) << r.output;
      const double peak = std::stod(r.output.substr(at + key.size())) * 1024.0;
      const double want = static_cast<double>(rank == 0 ? rank0 : rank1);
      ASSERT_GT(want, 0.0) << e.output;
      EXPECT_NEAR(peak / want, 1.0, 0.10)
          << "rank " << rank << ": peak RSS " << peak << " bytes against explain's " << want << "\n"
          << e.output;
    }
  }
}

}  // namespace
}  // namespace mptrain
