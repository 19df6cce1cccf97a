// `mptrain train --model llama` as a user runs it (issue 40): a tiny Llama learns from token
// shards, checkpoints as a Hugging Face LlamaForCausalLM folder, resumes bit for bit, is evaluated
// and sampled from, trains in bf16 and fp16, and a checkpoint of one family is refused by the other.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::read_losses;
using testing::run_mptrain;
using testing::TempDir;

std::string llama_args(const std::string& data) {
  return "train --model llama --preset llama-tiny --train-data '" + data + "/train_*.bin' --val-data '" + data +
         "/val_*.bin' --batch 2 --seq 32 --lr 3e-3 --warmup 2 --val-steps 2 --sample-tokens 4 --threads 2 "
         "--deterministic --seed 5";
}

TEST(LlamaTrain, LearnsCheckpointsAsHuggingFaceAndResumesBitForBit) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  auto a = run_mptrain(llama_args(tmp.path()) + " --steps 12 --save-every 6 --run-dir " + (tmp / "a"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("heads over 2 key/value heads"), std::string::npos) << a.output;
  const auto la = read_losses(tmp / "a");
  ASSERT_EQ(la.size(), 12u);
  EXPECT_LT(la.back().second, la.front().second - 0.5) << "the loss did not fall";

  // The checkpoint reads as a Hugging Face Llama folder.
  nlohmann::json config;
  std::ifstream(tmp / "a/step_00000012/config.json") >> config;
  EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(config["num_key_value_heads"], 2);
  SafetensorsFile weights(tmp / "a/step_00000012/model.safetensors");
  EXPECT_TRUE(weights.contains("model.layers.1.self_attn.k_proj.weight"));
  EXPECT_TRUE(weights.contains("lm_head.weight"));

  // Resumed from step 6: the uninterrupted run's losses and weights, bit for bit.
  auto b = run_mptrain(llama_args(tmp.path()) + " --steps 12 --run-dir " + (tmp / "b") + " --resume " +
                       (tmp / "a/step_00000006"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto lb = read_losses(tmp / "b");
  ASSERT_EQ(lb.size(), 6u);
  for (size_t i = 0; i < lb.size(); ++i) EXPECT_EQ(lb[i].second, la[6 + i].second) << "step " << lb[i].first;
  auto same = testing::run_command("cmp " + (tmp / "a/step_00000012/model.safetensors") + " " +
                                   (tmp / "b/step_00000012/model.safetensors"));
  EXPECT_EQ(same.exit_code, 0) << same.output;

  // eval and generate load it as they load GPT-2's.
  auto ev = run_mptrain("eval --checkpoint " + (tmp / "a/step_00000012") + " --data '" + tmp.path() +
                        "/val_*.bin' --batch 2 --seq 32 --steps 2 --threads 2");
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  EXPECT_NE(ev.output.find("llama: 2 layers, 4 heads over 2 key/value heads"), std::string::npos) << ev.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(ev.output, m, std::regex("loss ([0-9.]+) \\| perplexity"))) << ev.output;
  EXPECT_LT(std::stod(m[1]), la.front().second) << "the trained model's loss is not below the first step's";
  auto gen = run_mptrain("generate --checkpoint " + (tmp / "a/step_00000012") +
                         " --prompt 'The' --max-new-tokens 4 --seed 1 --vocab-dir " + testing::gpt2_vocab_dir());
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_EQ(gen.output.rfind("The", 0), 0u) << gen.output;

  // Another family's trainer refuses the checkpoint with one line naming the family.
  auto c = run_mptrain("train --train-data '" + tmp.path() + "/train_*.bin' --batch 2 --seq 32 --steps 13 "
                       "--threads 2 --run-dir " + (tmp / "c") + " --resume " + (tmp / "a/step_00000012"));
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.output.find("is a llama model; train it with --model llama"), std::string::npos) << c.output;
}

TEST(LlamaTrain, TrainsInBf16AndFp16) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  for (const std::string precision : {"bf16", "fp16"}) {  // fp16: with dynamic loss scaling
    auto r = run_mptrain(llama_args(tmp.path()) + " --precision " + precision + " --steps 6 --run-dir " +
                         (tmp / precision));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto l = read_losses(tmp / precision);
    ASSERT_EQ(l.size(), 6u) << precision;
    EXPECT_LT(l.back().second, l.front().second) << precision << "\n" << r.output;
  }
}

// The block options: ReLU² with QK-norm in bf16 learns and saves as mptrain's own config type
// (no transformers class computes ReLU²: export refuses it in one line); QK-norm alone saves
// and exports as Qwen3ForCausalLM; eval loads both; GPT-2 refuses the options.
TEST(LlamaTrain, Relu2AndQkNormTrainSaveAndExport) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  auto r = run_mptrain(llama_args(tmp.path()) +
                       " --mlp relu2 --qk-norm --precision bf16 --steps 8 --run-dir " + (tmp / "r"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto l = read_losses(tmp / "r");
  ASSERT_EQ(l.size(), 8u);
  EXPECT_LT(l.back().second, l.front().second - 0.3) << r.output;
  nlohmann::json config;
  std::ifstream(tmp / "r/step_00000008/config.json") >> config;
  EXPECT_EQ(config["model_type"], "mptrain_llama");
  EXPECT_EQ(config["hidden_act"], "relu2");
  EXPECT_EQ(config["qk_norm"], true);
  SafetensorsFile weights(tmp / "r/step_00000008/model.safetensors");
  EXPECT_TRUE(weights.contains("model.layers.1.self_attn.q_norm.weight"));
  EXPECT_FALSE(weights.contains("model.layers.1.mlp.gate_proj.weight"));
  auto ev = run_mptrain("eval --checkpoint " + (tmp / "r/step_00000008") + " --data '" + tmp.path() +
                        "/val_*.bin' --batch 2 --seq 32 --steps 2 --threads 2");
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  auto ex = run_mptrain("convert --to-hf " + (tmp / "r/step_00000008") + " --out " + (tmp / "hf-r"));
  EXPECT_NE(ex.exit_code, 0);
  EXPECT_NE(ex.output.find("a ReLU² MLP has no Hugging Face form"), std::string::npos) << ex.output;

  auto q = run_mptrain(llama_args(tmp.path()) + " --qk-norm --steps 4 --run-dir " + (tmp / "q"));
  ASSERT_EQ(q.exit_code, 0) << q.output;
  auto eq = run_mptrain("convert --to-hf " + (tmp / "q/step_00000004") + " --out " + (tmp / "hf-q"));
  ASSERT_EQ(eq.exit_code, 0) << eq.output;
  std::ifstream(tmp / "hf-q/config.json") >> config;
  EXPECT_EQ(config["architectures"][0], "Qwen3ForCausalLM");

  auto g = run_mptrain("train --qk-norm --train-data '" + tmp.path() + "/train_*.bin' --steps 1 --run-dir " +
                       (tmp / "g"));
  EXPECT_NE(g.exit_code, 0);
  EXPECT_NE(g.output.find("--mlp and --qk-norm are Llama's block options"), std::string::npos) << g.output;
}

}  // namespace
}  // namespace mptrain
