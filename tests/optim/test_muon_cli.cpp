// `mptrain train --optimizer muon` as a user runs it (subprocess):
//  - bad input (momentum outside [0, 1), zero Newton–Schulz steps, an unknown adjustment, Muon
//    flags with another optimizer) gives one clear error line and a non-zero exit
//  - the log says what Muon does; it learns
//  - resume continues bit for bit in every precision (the momentum buffers and AdamW's moments
//    come back; the model file stays the Hugging Face one) and under fp16's loss scaling
//  - the optimizer file holds momentum only for the matrices and AdamW's moments only for the rest
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "io/safetensors.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::expect_clear_error;
using testing::run_mptrain;
using testing::TempDir;

std::string train(const std::string& dir, const std::string& extra, int steps = 2,
                  const std::string& run = "run") {
  return "train --preset d2 --train-data '" + dir + "/train_*.bin' --batch 2 --seq 16 --steps " +
         std::to_string(steps) + " --threads 1 --run-dir " + dir + "/" + run + " " + extra;
}

TEST(MuonCli, BadHyperparametersGiveOneClearError) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string d = tmp.path();
  expect_clear_error(run_mptrain(train(d, "--optimizer muon --muon-momentum 1")), "--muon-momentum");
  expect_clear_error(run_mptrain(train(d, "--optimizer muon --muon-momentum -0.1")), "--muon-momentum");
  expect_clear_error(run_mptrain(train(d, "--optimizer muon --muon-ns-steps 0")), "--muon-ns-steps");
  expect_clear_error(run_mptrain(train(d, "--optimizer muon --muon-adjust-lr spectral")), "--muon-adjust-lr");
  expect_clear_error(run_mptrain(train(d, "--optimizer muon --muon-qkv two")), "--muon-qkv");
  expect_clear_error(run_mptrain(train(d, "--optimizer muon --muon-adamw-lr 0")), "--muon-adamw-lr");
  expect_clear_error(run_mptrain(train(d, "--muon-momentum 0.9")), "only applies with --optimizer muon");
  expect_clear_error(run_mptrain(train(d, "--optimizer sophia --muon-qkv one")),
                     "only applies with --optimizer muon");
}

std::vector<double> losses(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<double> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("train_loss")) out.push_back(j["train_loss"].get<double>());
  }
  return out;
}

TEST(MuonCli, LearnsAndResumesBitForBitInEveryPrecision) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string d = tmp.path();
  for (const char* precision : {"fp32", "bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    const std::string p = precision;
    const std::string base =
        "train --preset d2 --train-data '" + d +
        "/train_*.bin' --batch 2 --seq 32 --lr 2e-2 --warmup 2 --sample-tokens 4 --threads 2 "
        "--deterministic --seed 5 --optimizer muon --total-batch 128 --steps 12 --log-every 1 "
        "--precision " +
        p;
    auto a = run_mptrain(base + " --save-every 5 --run-dir " + d + "/a" + p);
    ASSERT_EQ(a.exit_code, 0) << a.output;
    EXPECT_NE(
        a.output.find("optimizer muon: 12 hidden matrices (q, k, v as three), momentum 0.95 (Nesterov), 5 "
                      "Newton-Schulz steps in " +
                      std::string(p == "fp32" ? "fp32" : "bf16")),
        std::string::npos)
        << a.output;
    const auto la = losses(d + "/a" + p);
    ASSERT_EQ(la.size(), 12u);
    EXPECT_LT(la.back(), la.front() - 1.0) << "Muon does not learn";
    auto b =
        run_mptrain(base + " --run-dir " + d + "/b" + p + " --resume " + d + "/a" + p + "/step_00000005");
    ASSERT_EQ(b.exit_code, 0) << b.output;
    const auto lb = losses(d + "/b" + p);
    ASSERT_EQ(lb.size(), 7u);
    for (size_t i = 0; i < lb.size(); ++i) EXPECT_EQ(lb[i], la[5 + i]) << "step " << 6 + i;
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      auto cmp = testing::run_command("cmp " + d + "/a" + p + "/step_00000012/" + file + " " + d + "/b" + p +
                                      "/step_00000012/" + file);
      EXPECT_EQ(cmp.exit_code, 0) << file << ": " << cmp.output;
    }
  }
  // What the optimizer file holds: momentum for the matrices, AdamW's moments for the rest.
  SafetensorsFile file(d + "/afp32/step_00000012/optimizer.safetensors");
  EXPECT_EQ(file.metadata().at("optimizer"), "muon");
  const std::vector<std::string> names = file.names();
  struct Has {
    const std::vector<std::string>& names;
    bool has(const std::string& n) const { return std::find(names.begin(), names.end(), n) != names.end(); }
  } opt{names};
  EXPECT_TRUE(opt.has("momentum_buffer.h.0.attn.c_attn.weight"));
  EXPECT_TRUE(opt.has("momentum_buffer.h.1.mlp.c_proj.weight"));
  EXPECT_FALSE(opt.has("momentum_buffer.wte.weight"));
  EXPECT_FALSE(opt.has("exp_avg.h.0.attn.c_attn.weight"));
  EXPECT_TRUE(opt.has("exp_avg.wte.weight"));
  EXPECT_TRUE(opt.has("exp_avg_sq.h.0.ln_1.bias"));
  // Resuming Muon's state with another optimizer is refused by name.
  expect_clear_error(
      run_mptrain(train(d, "--optimizer adamw --resume " + d + "/afp32/step_00000005", 6, "c")),
      "holds muon optimizer state, but this run uses --optimizer adamw");
}

}  // namespace
}  // namespace mptrain
