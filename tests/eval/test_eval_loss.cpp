// `mptrain eval --data`: the loss it prints is the mean of the model's forward losses over the
// shard's consecutive B×T windows, computed here window by window without the loader;
// the default is one full pass over every shard, --steps N takes the first N windows.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <regex>

#include "backend/cpu/context.h"
#include "common/test_util.h"
#include "data/shard.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"
#include "train/eval.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::run_mptrain;
using testing::TempDir;

struct Printed {
  double loss = 0, perplexity = 0;
  long long batches = 0;
};

Printed parse(const std::string& out) {
  std::smatch m;
  Printed p;
  if (std::regex_search(out, m, std::regex("loss ([0-9.]+) \\| perplexity ([0-9.]+) \\| ([0-9]+) batches"))) {
    p.loss = std::stod(m[1]);
    p.perplexity = std::stod(m[2]);
    p.batches = std::stoll(m[3]);
  }
  return p;
}

TEST(EvalLoss, EqualsTheMeanOfForwardLossesOverTheShardWindows) {
  omp_set_num_threads(2);  // as the command below: reductions are split by thread count
  TempDir tmp;
  Gpt2Config cfg;
  cfg.n_layer = 2;
  cfg.n_head = 2;
  cfg.n_embd = 32;
  cfg.vocab_size = 300;
  cfg.padded_vocab_size = 384;
  cfg.block_size = 64;
  cpu::Context ctx;
  Gpt2 model(cfg, ctx);
  model.init_weights(4);
  fs::create_directories(tmp / "ckpt");
  save_weights_checkpoint(tmp / "ckpt", cfg, model.table(), model.params().data(), TrainState{});

  // Two shards of token streams with some structure; 1000 and 700 tokens.
  std::vector<std::vector<uint16_t>> shards = {std::vector<uint16_t>(1000), std::vector<uint16_t>(700)};
  for (size_t s = 0; s < shards.size(); ++s)
    for (size_t i = 0; i < shards[s].size(); ++i)
      shards[s][i] = static_cast<uint16_t>((i * i * 7 + i * 13 + s) % 300);
  write_shard(tmp / "val_000000.bin", shards[0]);
  write_shard(tmp / "val_000001.bin", shards[1]);

  const int B = 2, T = 16, W = B * T;
  model.plan(B, T);
  std::vector<double> window_losses;
  std::vector<int> in(W), tg(W);
  for (const auto& tokens : shards)
    for (size_t start = 0; start + W + 1 <= tokens.size(); start += W) {
      for (int i = 0; i < W; ++i) {
        in[i] = tokens[start + i];
        tg[i] = tokens[start + i + 1];
      }
      window_losses.push_back(model.forward(in.data(), tg.data(), B, T));
    }
  ASSERT_EQ(window_losses.size(), 31u + 21u);  // floor(999/32) + floor(699/32)
  auto mean_of_first = [&](size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += window_losses[i];
    return s / static_cast<double>(n);
  };

  // The library function: the same arithmetic, so the same double.
  TokenLoader loader(tmp / "val_*.bin", B, T, cfg.vocab_size);
  ASSERT_EQ(windows_per_pass(tmp / "val_*.bin", B, T), 52);
  const LossEval all = evaluate_loss(model, loader, 52);
  EXPECT_EQ(all.batches, 52);
  EXPECT_EQ(all.tokens, 52 * W);
  EXPECT_DOUBLE_EQ(all.loss, mean_of_first(52));
  EXPECT_DOUBLE_EQ(all.perplexity, std::exp(all.loss));
  EXPECT_DOUBLE_EQ(evaluate_loss(model, loader, 5).loss, mean_of_first(5));  // from the start again

  // The command: one pass by default, --steps N for the first N windows (printed to 6 decimals).
  const std::string base = "eval --checkpoint " + (tmp / "ckpt") + " --data '" + (tmp / "val_*.bin") +
                           "' --batch 2 --seq 16 --threads 2";
  auto r = run_mptrain(base);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Printed p = parse(r.output);
  EXPECT_EQ(p.batches, 52) << r.output;
  EXPECT_NEAR(p.loss, mean_of_first(52), 1e-6) << r.output;
  EXPECT_NEAR(p.perplexity, std::exp(mean_of_first(52)), 1e-3) << r.output;
  auto r5 = run_mptrain(base + " --steps 5");
  ASSERT_EQ(r5.exit_code, 0) << r5.output;
  p = parse(r5.output);
  EXPECT_EQ(p.batches, 5);
  EXPECT_NEAR(p.loss, mean_of_first(5), 1e-6) << r5.output;
}

TEST(EvalLoss, UsageErrorsAreOneLine) {
  TempDir tmp;
  Gpt2Config cfg;
  cfg.n_layer = 1;
  cfg.n_head = 2;
  cfg.n_embd = 32;
  cfg.vocab_size = 300;
  cfg.padded_vocab_size = 384;
  cfg.block_size = 64;
  cpu::Context ctx;
  Gpt2 model(cfg, ctx);
  model.init_weights(4);
  fs::create_directories(tmp / "ckpt");
  save_weights_checkpoint(tmp / "ckpt", cfg, model.table(), model.params().data(), TrainState{});
  write_shard(tmp / "val_000000.bin", std::vector<uint16_t>(100, 7));
  auto expect_error = [](const testing::RunResult& r, const std::string& needle) {
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.rfind("mptrain: error:", 0), 0u) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  };
  const std::string ck = "eval --checkpoint " + (tmp / "ckpt");
  expect_error(run_mptrain(ck), "nothing to evaluate");
  expect_error(run_mptrain(ck + " --data '" + (tmp / "val_*.bin") + "' --seq 128"),
               "longer than the model's context");
  expect_error(run_mptrain(ck + " --data '" + (tmp / "val_*.bin") + "' --batch 8 --seq 32"),
               "fewer than one batch");
  expect_error(run_mptrain(ck + " --data '" + (tmp / "none_*.bin") + "' --seq 16"), "no token shards match");
  expect_error(run_mptrain("eval --checkpoint " + (tmp / "nowhere") + " --data x"), "nowhere");
}

}  // namespace
}  // namespace mptrain
