// `mptrain eval --data`: the loss it prints is the mean of the model's forward losses over the
// shard's consecutive B×T windows, computed here window by window without the loader;
// the default is one full pass over every shard, --steps N takes the first N windows. With
// --precision P the same checkpoint and shards give the fp32 loss within that precision's rounding
// (the low-precision modes compute the GEMMs on rounded inputs, so the loss moves a little, and
// only a little); the model line names the precision.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <regex>

#include "backend/cpu/context.h"
#include "backend/device.h"
#include "common/test_util.h"
#include "data/shard.h"
#include "eval/eval.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"
#include "common/host_backend.h"

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

// A GPT-2 over a 300-token vocabulary (padded to 384) with a 64-token context.
Gpt2Config small_config(int n_layer, int n_embd) {
  Gpt2Config cfg;
  cfg.n_layer = n_layer;
  cfg.n_head = 2;
  cfg.n_embd = n_embd;
  cfg.vocab_size = 300;
  cfg.padded_vocab_size = 384;
  cfg.block_size = 64;
  return cfg;
}

// The model's weights as a checkpoint folder that `mptrain eval --checkpoint` reads.
std::string save_checkpoint(const TempDir& tmp, Gpt2& model) {
  const std::string dir = tmp / "ckpt";
  fs::create_directories(dir);
  save_weights_checkpoint(dir, model.config(), model.table(), model.params().data(), TrainState{});
  return dir;
}

TEST(EvalLoss, EqualsTheMeanOfForwardLossesOverTheShardWindows) {
  omp_set_num_threads(2);  // as the command below: reductions are split by thread count
  TempDir tmp;
  const Gpt2Config cfg = small_config(2, 32);
  cpu::Context ctx;
  Gpt2 model(cfg, cpu_backend(ctx));
  model.init_weights(4);
  save_checkpoint(tmp, model);

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
  cpu::Context ctx;
  Gpt2 model(small_config(1, 32), cpu_backend(ctx));
  model.init_weights(4);
  save_checkpoint(tmp, model);
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

// A small GPT-2's checkpoint (tmp/ckpt) and a validation shard (tmp/val_000000.bin); returns the
// `eval` command over them.
std::string eval_fixture(const TempDir& tmp) {
  cpu::Context ctx;
  Gpt2 model(small_config(2, 64), cpu_backend(ctx));
  model.init_weights(11);
  save_checkpoint(tmp, model);
  std::vector<uint16_t> tokens(3000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>((i * i * 5 + i * 17) % 300);
  write_shard(tmp / "val_000000.bin", tokens);
  return "eval --checkpoint " + (tmp / "ckpt") + " --data '" + (tmp / "val_*.bin") + "' --batch 4 --seq 32 --threads 2";
}

TEST(EvalPrecision, EveryPrecisionGivesTheFp32LossWithinItsRounding) {
  TempDir tmp;
  const std::string base = eval_fixture(tmp);
  auto ref = run_mptrain(base);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const double fp32 = parse(ref.output).loss;
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
    EXPECT_NEAR(parse(r.output).loss, fp32, tol * fp32 + 1e-6) << p;
  }
}

// `eval` (and so HellaSwag, which runs in it) and `generate` take --device and --policy-of as
// `train` does: the GPU's plan run on the CPU gives the CPU plan's loss within 16-bit rounding,
// the device prints, and a device this build or machine lacks is one clear line.
TEST(EvalDevice, GpuPlanOnTheCpuAndDevicesThisMachineLacks) {
  TempDir tmp;
  const std::string base = eval_fixture(tmp) + " --precision bf16";
  auto cpu_plan = run_mptrain(base);
  ASSERT_EQ(cpu_plan.exit_code, 0) << cpu_plan.output;
  EXPECT_NE(cpu_plan.output.find("device cpu"), std::string::npos) << cpu_plan.output;
  auto gpu_plan = run_mptrain(base + " --policy-of cuda");
  ASSERT_EQ(gpu_plan.exit_code, 0) << gpu_plan.output;
  const double a = parse(cpu_plan.output).loss, b = parse(gpu_plan.output).loss;
  EXPECT_GT(a, 0.0);
  EXPECT_NEAR(b, a, 2e-2 * a) << "the GPU's plan's loss";
  EXPECT_NE(b, a) << "--policy-of cuda ran the CPU's plan (the 16-bit stream rounds more)";
  testing::expect_clear_error(run_mptrain(base + " --policy-of cuda --device cuda"),
                              "--policy-of runs another device's plan on the CPU backend: it needs --device cpu");
  if (!cuda_compiled()) {
    testing::expect_clear_error(run_mptrain(base + " --device cuda"), "this build has no CUDA backend");
  } else if (cuda_device_count() == 0) {
    testing::expect_clear_error(run_mptrain(base + " --device cuda"), "no CUDA device is visible");
    auto auto_dev = run_mptrain(base + " --device auto");
    ASSERT_EQ(auto_dev.exit_code, 0) << auto_dev.output;
    EXPECT_NE(auto_dev.output.find("device cpu"), std::string::npos) << "auto without a GPU: " << auto_dev.output;
  } else {
    auto on_gpu = run_mptrain(base + " --device cuda");
    ASSERT_EQ(on_gpu.exit_code, 0) << on_gpu.output;
    EXPECT_NEAR(parse(on_gpu.output).loss, b, 2e-2 * b) << "the GPU against its plan run on the CPU";
  }
}

}  // namespace
}  // namespace mptrain
