// `mptrain eval --precision P`: the same checkpoint and shards give the fp32 loss within a
// precision's rounding (the low-precision modes compute the GEMMs on rounded inputs, so the
// loss moves a little, and only a little); the model line names the precision.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "backend/cpu/context.h"
#include "common/test_util.h"
#include "data/shard.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::run_mptrain;
using testing::TempDir;

double printed_loss(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex("loss ([0-9.]+) \\| perplexity")) ? std::stod(m[1]) : -1.0;
}

TEST(EvalPrecision, EveryPrecisionGivesTheFp32LossWithinItsRounding) {
  TempDir tmp;
  Gpt2Config cfg;
  cfg.n_layer = 2;
  cfg.n_head = 2;
  cfg.n_embd = 64;
  cfg.vocab_size = 300;
  cfg.padded_vocab_size = 384;
  cfg.block_size = 64;
  cpu::Context ctx;
  Gpt2 model(cfg, ctx);
  model.init_weights(11);
  fs::create_directories(tmp / "ckpt");
  save_weights_checkpoint(tmp / "ckpt", cfg, model.table(), model.params().data(), TrainState{});
  std::vector<uint16_t> tokens(3000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>((i * i * 5 + i * 17) % 300);
  write_shard(tmp / "val_000000.bin", tokens);

  const std::string base = "eval --checkpoint " + (tmp / "ckpt") + " --data '" + (tmp / "val_*.bin") +
                           "' --batch 4 --seq 32 --threads 2";
  auto ref = run_mptrain(base);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const double fp32 = printed_loss(ref.output);
  ASSERT_GT(fp32, 0.0) << ref.output;
  EXPECT_NE(ref.output.find("; fp32"), std::string::npos) << ref.output;
  // Relative tolerance per precision: tf32 and bf16 round GEMM inputs to 10 and 7 mantissa
  // bits, fp16 to 10 (its range is no issue at these magnitudes); the loss averages out the
  // rounding, so it moves far less than a single element's relative error.
  for (const auto& [p, tol] : std::vector<std::pair<std::string, double>>{
           {"fp32", 0.0}, {"tf32", 2e-3}, {"bf16", 1e-2}, {"fp16", 2e-3}}) {
    auto r = run_mptrain(base + " --precision " + p);
    ASSERT_EQ(r.exit_code, 0) << p << "\n" << r.output;
    EXPECT_NE(r.output.find("; " + p), std::string::npos) << r.output;
    const double loss = printed_loss(r.output);
    EXPECT_NEAR(loss, fp32, tol * fp32 + 1e-6) << p;
  }
}

}  // namespace
}  // namespace mptrain
