// TokenLoader (data/loader.h) in its shuffled order (`train --shuffle`): every sequence of T+1
// tokens once an epoch and a new order the next, a function of the seed; the same global batch
// whatever the world size; a saved position resumes the same stream; a position of the other
// order or outside the data is refused. And the sequential order it keeps by default.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/data_test_util.h"
#include "data/loader.h"
#include "data/shard.h"

namespace mptrain {
namespace {

using data_test::TempDir;

constexpr int kT = 8;
constexpr int kVocab = 65536;

// Two shards whose every token is distinct and counts up by one, so a row names where it was cut:
// shard 0 holds 0, 1, ... (37 sequences and no spare token), shard 1 holds 30000, 30001, ...
// (20 sequences and 4 spare tokens): 57 sequences in all.
std::string write_counting_shards(const std::string& dir) {
  std::vector<uint16_t> a(kT * 37 + 1), b(kT * 20 + 5);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint16_t>(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint16_t>(30000 + i);
  write_shard(dir + "/t_000000.bin", a);
  write_shard(dir + "/t_000001.bin", b);
  return dir + "/t_*.bin";
}

// The first token of each row of `steps` global batches (B rows each).
std::vector<int> row_starts(TokenLoader& loader, int steps) {
  std::vector<int> in(static_cast<size_t>(loader.B()) * kT), tg(in.size()), starts;
  for (int s = 0; s < steps; ++s) {
    loader.next(in.data(), tg.data());
    for (int b = 0; b < loader.B(); ++b) starts.push_back(in[static_cast<size_t>(b) * kT]);
  }
  return starts;
}

TEST(TokenLoader, ShuffledEpochTakesEverySequenceOnceThenANewOrder) {
  TempDir tmp;
  TokenLoader loader(write_counting_shards(tmp.path()), 4, kT, kVocab, 0, 1, {.shuffle = true, .seed = 7});
  ASSERT_EQ(loader.num_sequences(), 57u);
  std::vector<int> in(4 * kT), tg(in.size());
  std::set<int> seen;
  std::vector<int> epoch0;
  for (int step = 0; step < 14; ++step) {  // 14 × 4 = 56 of the 57 sequences; the 57th is dropped
    loader.next(in.data(), tg.data());
    for (int b = 0; b < 4; ++b) {
      const int* row = &in[b * kT];
      const int start = row[0];
      const int local = start >= 30000 ? start - 30000 : start;
      EXPECT_EQ(local % kT, 0) << "a sequence starts at a multiple of T in its shard";
      for (int t = 0; t < kT; ++t) {
        EXPECT_EQ(row[t], start + t) << "a row is one run of consecutive tokens";
        EXPECT_EQ(tg[b * kT + t], start + t + 1) << "the target is the next token";
      }
      EXPECT_TRUE(seen.insert(start).second) << "sequence " << start << " twice in an epoch";
      epoch0.push_back(start);
    }
    EXPECT_EQ(loader.position().epoch, 0);
  }
  EXPECT_EQ(seen.size(), 56u);
  EXPECT_FALSE(std::is_sorted(epoch0.begin(), epoch0.end()));
  // Rows from both shards arrive interleaved, not one shard after the other.
  const auto first_of_shard1 = std::find_if(epoch0.begin(), epoch0.end(), [](int s) { return s >= 30000; });
  EXPECT_LT(first_of_shard1 - epoch0.begin(), 20);
  const std::vector<int> epoch1 = row_starts(loader, 14);
  EXPECT_EQ(loader.position().epoch, 1);
  EXPECT_NE(epoch1, epoch0);
  EXPECT_EQ(std::set<int>(epoch1.begin(), epoch1.end()).size(), 56u);
}

TEST(TokenLoader, ShuffledOrderIsAFunctionOfTheSeed) {
  TempDir tmp;
  const std::string pattern = write_counting_shards(tmp.path());
  TokenLoader a(pattern, 4, kT, kVocab, 0, 1, {.shuffle = true, .seed = 7});
  TokenLoader b(pattern, 4, kT, kVocab, 0, 1, {.shuffle = true, .seed = 7});
  TokenLoader c(pattern, 4, kT, kVocab, 0, 1, {.shuffle = true, .seed = 8});
  const auto ra = row_starts(a, 20);
  EXPECT_EQ(row_starts(b, 20), ra);
  EXPECT_NE(row_starts(c, 20), ra);
}

TEST(TokenLoader, ShuffledGlobalBatchIsTheSameWhateverTheWorldSize) {
  TempDir tmp;
  const std::string pattern = write_counting_shards(tmp.path());
  TokenLoader one(pattern, 4, kT, kVocab, 0, 1, {.shuffle = true, .seed = 3});
  TokenLoader r0(pattern, 2, kT, kVocab, 0, 2, {.shuffle = true, .seed = 3});
  TokenLoader r1(pattern, 2, kT, kVocab, 1, 2, {.shuffle = true, .seed = 3});
  for (int step = 0; step < 30; ++step) {  // across two epoch boundaries
    const auto whole = row_starts(one, 1), a = row_starts(r0, 1), b = row_starts(r1, 1);
    std::vector<int> joined(a);
    joined.insert(joined.end(), b.begin(), b.end());
    EXPECT_EQ(joined, whole) << "step " << step;
  }
}

TEST(TokenLoader, SavedPositionResumesTheSameStream) {
  TempDir tmp;
  const std::string pattern = write_counting_shards(tmp.path());
  for (bool shuffle : {false, true}) {
    SCOPED_TRACE(shuffle ? "shuffled" : "sequential");
    TokenLoader a(pattern, 4, kT, kVocab, 0, 1, {.shuffle = shuffle, .seed = 11});
    row_starts(a, 17);  // into the second epoch of the shuffled order
    const LoaderPosition at = a.position();
    EXPECT_EQ(at.shuffled, shuffle);
    const auto rest = row_starts(a, 20);
    TokenLoader b(pattern, 4, kT, kVocab, 0, 1, {.shuffle = shuffle, .seed = 11});
    b.set_position(at);
    EXPECT_EQ(row_starts(b, 20), rest);
  }
}

TEST(TokenLoader, PositionOfTheOtherOrderOrOutsideTheDataIsRefused) {
  TempDir tmp;
  const std::string pattern = write_counting_shards(tmp.path());
  TokenLoader sequential(pattern, 4, kT, kVocab);
  TokenLoader shuffled(pattern, 4, kT, kVocab, 0, 1, {.shuffle = true, .seed = 1});
  auto error_of = [](TokenLoader& l, const LoaderPosition& p) {
    try {
      l.set_position(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error_of(shuffled, {})
                .find("taken in sequential order, and this run reads its data in shuffled "
                      "(--shuffle) order; leave out --shuffle to resume it"),
            std::string::npos);
  EXPECT_NE(error_of(sequential, {.shuffled = true}).find("pass --shuffle to resume it"), std::string::npos);
  EXPECT_NE(error_of(shuffled, {.shuffled = true, .index = 58}).find("does not fit the 57 sequences"),
            std::string::npos);
  EXPECT_NE(error_of(shuffled, {.epoch = -1, .shuffled = true}).find("does not fit"), std::string::npos);
  EXPECT_EQ(error_of(shuffled, {.epoch = 4, .shuffled = true, .index = 57}), "accepted");
}

TEST(TokenLoader, SequentialOrderWalksTheShardsInTurn) {
  TempDir tmp;
  TokenLoader loader(write_counting_shards(tmp.path()), 4, kT, kVocab);
  EXPECT_FALSE(loader.shuffled());
  EXPECT_EQ(loader.num_sequences(), 0u);
  // Shard 0 (297 tokens) gives 9 windows of 32 tokens; then shard 1 from its start.
  const auto starts = row_starts(loader, 10);
  for (int w = 0; w < 9; ++w)
    for (int b = 0; b < 4; ++b) EXPECT_EQ(starts[w * 4 + b], w * 32 + b * kT);
  EXPECT_EQ(starts[36], 30000);
}

// uint32 shards (vocabularies past 65,536 tokens) give the same batches as the same ids would in
// uint16 shards, in both orders, with ids past 65,535 intact, and are range-checked alike.
TEST(TokenLoader, WideShardsReadAsTheirIds) {
  TempDir tmp;
  const std::string narrow = write_counting_shards(tmp.path());
  std::vector<uint32_t> a(kT * 37 + 1), b(kT * 20 + 5);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint32_t>(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint32_t>(100000 + i);
  write_shard(tmp / "w_000000.bin", a);
  write_shard(tmp / "w_000001.bin", b);
  for (const bool shuffle : {false, true}) {
    TokenLoader n(narrow, 4, kT, kVocab, 0, 1, {.shuffle = shuffle, .seed = 3});
    TokenLoader w(tmp / "w_*.bin", 4, kT, 100000 + static_cast<int>(b.size()), 0, 1,
                  {.shuffle = shuffle, .seed = 3});
    std::vector<int> ni(4 * kT), nt(ni.size()), wi(ni.size()), wt(ni.size());
    for (int step = 0; step < 16; ++step) {
      n.next(ni.data(), nt.data());
      w.next(wi.data(), wt.data());
      for (size_t k = 0; k < ni.size(); ++k) {  // shard 1's ids are 30000 + i in one, 100000 + i in the other
        ASSERT_EQ(wi[k], ni[k] >= 30000 ? ni[k] + 70000 : ni[k]) << "step " << step << " shuffle " << shuffle;
        ASSERT_EQ(wt[k], nt[k] >= 30000 ? nt[k] + 70000 : nt[k]);
      }
    }
  }
  try {
    TokenLoader(tmp / "w_*.bin", 4, kT, 100000);
    ADD_FAILURE() << "ids past the vocabulary accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 100000 at position 0 of shard"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mptrain
