// The seeds' job as a user runs it, shrunk to seconds: the fortunes as a JSON lines corpus
// compressed with zstd (as The Pile and most hub shards ship), `mptrain prepare` into llm.c's
// FineWeb layout (the first shard val), and recipes/gpt2-124m-fineweb.toml's GPT-2 124M trained on
// it for 20 steps with a batch small enough for a CI core (B 1 x T 64, accumulated to 128 tokens),
// everything else the recipe's: the run completes, its losses are finite and falling, and the run's
// config.json keeps the recipe's hyperparameters.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/corpus_reader.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::run_mptrain;
using testing::TempDir;

constexpr const char* kCorpus = "/usr/share/games/fortunes";

// The fortunes' files as JSON lines, a fortune a record ({"id": n, "text": ...}).
size_t write_fortunes_jsonl(const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  size_t n = 0;
  for (const TextFile& f : expand_inputs({kCorpus}, {"*.dat", "*.u8"})) {
    const std::string text = read_text_file(f.path);
    for (std::string_view doc : split_documents(text, "%"))
      out << nlohmann::json{{"id", n++}, {"text", doc}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
          << "\n";
  }
  return n;
}

TEST(Recipe, Gpt2FinewebRunsOnAJsonLinesCorpus) {
  if (!fs::exists(kCorpus)) GTEST_SKIP() << kCorpus << " missing (scripts/setup.sh installs Debian's fortunes)";
  if (!fs::exists(testing::gpt2_vocab_dir() + "/encoder.json")) GTEST_SKIP() << "GPT-2 vocabulary missing";
  if (run_command("command -v zstd").exit_code != 0) GTEST_SKIP() << "zstd missing (scripts/setup.sh)";
  TempDir tmp;
  ASSERT_GT(write_fortunes_jsonl(tmp / "fortunes.jsonl"), 10000u);
  ASSERT_EQ(run_command("zstd -q --rm " + tmp / "fortunes.jsonl").exit_code, 0);
  const auto prep = run_mptrain("prepare " + tmp / "fortunes.jsonl.zst" + " -o " + tmp / "data" +
                                " --name edufineweb --shard-size 64K --progress none --vocab-dir " +
                                testing::gpt2_vocab_dir());
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  ASSERT_TRUE(fs::exists(tmp / "data/edufineweb_val_000000.bin")) << prep.output;
  ASSERT_TRUE(fs::exists(tmp / "data/edufineweb_train_000001.bin")) << prep.output;

  const std::string recipe = testing::source_dir() + "/recipes/gpt2-124m-fineweb.toml";
  const auto run = run_mptrain("train --config " + recipe + " --train-data '" + (tmp / "data/*_train_*.bin") +
                               "' --val-data '" + (tmp / "data/*_val_*.bin") +
                               "' --batch 1 --seq 64 --total-batch 128 --steps 20 --warmup 2 --val-every 10"
                               " --val-steps 2 --sample-every 0 --sample-tokens 8 --save-every 0 --progress none"
                               " --run-dir " +
                               (tmp / "run"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("done: 20/20 steps"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("model gpt2: 124475904 parameters"), std::string::npos) << run.output;

  std::vector<double> train, val;
  std::ifstream metrics(tmp / "run/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto m = nlohmann::json::parse(line);
    train.push_back(m.at("train_loss").get<double>());
    if (m.contains("val_loss")) val.push_back(m.at("val_loss").get<double>());
  }
  ASSERT_EQ(train.size(), 20u);
  ASSERT_EQ(val.size(), 2u);
  for (double l : train) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(train.back(), train.front() - 1.0) << "the training loss falls";
  EXPECT_LT(val[1], val[0]) << "the validation loss falls";

  std::ifstream cfg_file(tmp / "run/config.json");
  const auto cfg = nlohmann::json::parse(cfg_file).at("options");
  EXPECT_NEAR(cfg.at("lr").get<double>(), 6e-4, 1e-9);
  EXPECT_NEAR(cfg.at("min_lr_frac").get<double>(), 0.1, 1e-7);
  EXPECT_NEAR(cfg.at("weight_decay").get<double>(), 0.1, 1e-7);
  EXPECT_EQ(cfg.at("precision").get<std::string>(), "bf16");
}

}  // namespace
}  // namespace mptrain
