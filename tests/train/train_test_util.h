// Shared set-up for the training tests: small token shards and metrics parsing.
#pragma once
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "data/shard.h"

namespace mptrain::testing {

// A token stream with learnable structure (a byte-level encoding of repeated
// English-like text), so that short runs have a loss that moves.
inline std::vector<uint16_t> text_like_tokens(size_t n) {
  static const std::string text =
      "the quick brown fox jumps over the lazy dog. a stitch in time saves nine. "
      "all that glitters is not gold. the early bird catches the worm. ";
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(text[(i * 7 + i / text.size()) % text.size()]);
  return out;
}

// Writes train and val shards into dir; returns the train glob (val glob: dir/val_*.bin).
inline std::string write_small_shards(const std::string& dir, size_t train_tokens = 20000, size_t val_tokens = 4000) {
  auto train = text_like_tokens(train_tokens);
  auto val = text_like_tokens(val_tokens);
  write_shard(dir + "/train_000000.bin", train);
  write_shard(dir + "/val_000000.bin", val);
  return dir + "/train_*.bin";
}

// The "train_loss" of every record in a run's metrics.jsonl, by step.
inline std::vector<std::pair<int64_t, double>> read_losses(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<std::pair<int64_t, double>> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    out.emplace_back(j["step"].get<int64_t>(), j["train_loss"].get<double>());
  }
  return out;
}

// "this process now 176.9 MiB" in the trainer's refusal under --memory-limit (train/memory_estimate.h):
// its own resident set where it checked, in bytes; 0 when the output has none. A test that sets a
// limit between two batches' estimates adds it to what the run allocates (MemoryEstimate::to_allocate),
// which does not depend on the process.
inline size_t process_in_refusal(const std::string& output) {
  const std::string key = "this process now ";
  const size_t at = output.find(key);
  if (at == std::string::npos) return 0;
  size_t end = 0;
  const double v = std::stod(output.substr(at + key.size()), &end);
  const bool gib = output.compare(at + key.size() + end + 1, 3, "GiB") == 0;
  return static_cast<size_t>(v * (gib ? 1024.0 * 1024 * 1024 : 1024.0 * 1024));
}

// BERT instance files (dir/b_train.bert, dir/b_val.bert; T = 32, a 512-token vocabulary) made by
// `mptrain prepare --task bert` from one of Debian's fortune files. False when that corpus is
// missing (the caller skips); a failed prepare is a test failure.
inline bool prepare_bert_data(const std::string& dir) {
  const std::string corpus = fortunes_dir() + "/computers";
  if (!std::ifstream(corpus)) return false;
  const RunResult r = run_mptrain("prepare --task bert " + corpus +
                                  " --doc-delimiter '%' --val-fraction 0.1 --max-seq-len 32 --vocab-size 512"
                                  " --dupe-factor 1 --name b -q --out " + dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0;
}

// A test suite over the instance files of prepare_bert_data, made once per suite in its own
// temporary folder; its tests skip when Debian's fortunes are missing.
class BertDataSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    if (!prepare_bert_data(*tmp_ / "data")) {
      delete tmp_;
      tmp_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  void SetUp() override {
    if (!tmp_) GTEST_SKIP() << "Debian's fortunes missing (scripts/setup.sh installs them)";
  }
  static std::string data() { return *tmp_ / "data/b_train.bert"; }
  static std::string run_dir(const std::string& run) { return *tmp_ / run; }
  inline static TempDir* tmp_ = nullptr;
};

}  // namespace mptrain::testing
