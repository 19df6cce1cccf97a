// End to end on real text, as a user runs it: `mptrain prepare` on a small part of the
// default corpus (the `fortunes` file of Debian's fortunes, ~6K GPT-2 tokens), `mptrain
// train` a tiny preset for a few hundred steps (~20 epochs), then `mptrain generate`.
// The training loss must fall well below the unigram entropy of the training tokens: the
// best loss any model that ignores context can reach. (On the whole corpus a few hundred
// steps of a tiny model stay near the unigram entropy — PyTorch's GPT-2 does the same, see
// tests/ref — so a small text is what makes "learns from context" visible in seconds.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "data/shard.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::run_mptrain;
using testing::TempDir;

constexpr const char* kCorpus = "/usr/share/games/fortunes/fortunes";

std::string vocab_dir() { return testing::gpt2_vocab_dir(); }

// Entropy (nats) of the token frequency distribution of a shard.
double unigram_entropy(const std::string& path) {
  Shard shard(path);
  std::map<int, size_t> counts;
  shard.visit([&](auto ids) {
    for (const auto t : ids) ++counts[static_cast<int>(t)];
  });
  double h = 0.0;
  for (const auto& [tok, c] : counts) {
    const double p = static_cast<double>(c) / shard.size();
    h -= p * std::log(p);
  }
  return h;
}

TEST(EndToEnd, TinyGpt2LearnsFortunesWellBelowUnigramEntropy) {
  if (!fs::exists(kCorpus))
    GTEST_SKIP() << kCorpus << " missing (scripts/setup.sh installs Debian's fortunes)";
  if (!fs::exists(vocab_dir() + "/encoder.json"))
    GTEST_SKIP() << "GPT-2 vocabulary missing (scripts/setup.sh)";
  TempDir tmp;
  auto prep = run_mptrain("prepare " + std::string(kCorpus) +
                          " --doc-delimiter '%' --val-fraction 0.05 --name fortunes --progress none"
                          " --out " +
                          (tmp / "data") + " --vocab-dir " + vocab_dir());
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const std::string train_glob = tmp / "data/fortunes_train_*.bin";
  const double entropy = unigram_entropy(glob_shards(train_glob).front());

  auto train = run_mptrain("train --preset d2 --train-data '" + train_glob +
                           "' --batch 8 --seq 64 --steps 300 --lr 1e-2 --warmup 20 --sample-tokens 16"
                           " --log-every 50 --threads 2 --run-dir " +
                           (tmp / "run") + " --vocab-dir " + vocab_dir());
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const auto losses = testing::read_losses(tmp / "run");
  ASSERT_EQ(losses.size(), 300u);
  double tail = 0.0;  // mean of the last 20 steps: single batches are noisy
  for (size_t i = losses.size() - 20; i < losses.size(); ++i) tail += losses[i].second / 20.0;
  RecordProperty("unigram_entropy", std::to_string(entropy));
  RecordProperty("final_train_loss", std::to_string(tail));
  EXPECT_LT(tail, entropy - 1.0) << "train loss " << tail << " vs unigram entropy " << entropy << "\n"
                                 << train.output;

  // The checkpoint generates text (decoded with GPT-2's tokenizer), reproducibly for a seed.
  const std::string gen = "generate --checkpoint " + (tmp / "run") +
                          " --prompt 'The cat' --max-new-tokens 12 --seed 3"
                          " --vocab-dir " +
                          vocab_dir();
  auto g1 = run_mptrain(gen), g2 = run_mptrain(gen);
  ASSERT_EQ(g1.exit_code, 0) << g1.output;
  EXPECT_EQ(g1.output.rfind("The cat", 0), 0u) << g1.output;
  EXPECT_GT(g1.output.size(), std::string("The cat\n").size());
  EXPECT_EQ(g1.output, g2.output);
}

}  // namespace
}  // namespace mptrain
