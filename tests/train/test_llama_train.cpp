// `mptrain train --model llama` as a user runs it (issue 40): a tiny Llama learns from token
// shards, checkpoints as a Hugging Face LlamaForCausalLM folder, resumes bit for bit, is evaluated
// and sampled from, trains in bf16 and fp16, and a checkpoint of one family is refused by the other.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "data/shard.h"
#include "data/wide_vocab.h"
#include "io/safetensors.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::read_losses;
using testing::run_mptrain;
using testing::TempDir;

std::string llama_args(const std::string& data) {
  return "train --model llama --preset llama-tiny --train-data '" + data + "/train_*.bin' --val-data '" +
         data +
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
  EXPECT_NE(ev.output.find("llama: 2 layers, 4 heads over 2 key/value heads"), std::string::npos)
      << ev.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(ev.output, m, std::regex("loss ([0-9.]+) \\| perplexity"))) << ev.output;
  EXPECT_LT(std::stod(m[1]), la.front().second) << "the trained model's loss is not below the first step's";
  auto gen =
      run_mptrain("generate --checkpoint " + (tmp / "a/step_00000012") +
                  " --prompt 'The' --max-new-tokens 4 --seed 1 --vocab-dir " + testing::gpt2_vocab_dir());
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_EQ(gen.output.rfind("The", 0), 0u) << gen.output;

  // Another family's trainer refuses the checkpoint with one line naming the family.
  auto c = run_mptrain("train --train-data '" + tmp.path() +
                       "/train_*.bin' --batch 2 --seq 32 --steps 13 "
                       "--threads 2 --run-dir " +
                       (tmp / "c") + " --resume " + (tmp / "a/step_00000012"));
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.output.find("is a llama model; train it with --model llama"), std::string::npos) << c.output;
}

// A tokenizer of Llama 3's kind (a vocabulary past 65,536 tokens, its own end of text), from text to
// generate: prepare writes uint32 shards, train --vocab-size sizes the model over them, and the
// samples and generate decode with the folder's tokenizer.
TEST(LlamaTrain, AVocabularyPastUint16FromPrepareToGenerate) {
  const std::string corpus = testing::fortunes_dir() + "/computers";
  if (!std::ifstream(corpus))
    GTEST_SKIP() << "Debian's fortunes are not installed (scripts/setup.sh installs them)";
  TempDir tmp;
  const std::string vocab = data_test::write_wide_vocab_folder(tmp / "wide");
  auto p =
      run_mptrain("prepare " + corpus + " --doc-delimiter '%' --val-fraction 0.1 --name w -q --vocab-dir " +
                  vocab + " --out " + (tmp / "data"));
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const Shard shard(tmp / "data/w_train_000000.bin");
  EXPECT_EQ(shard.token_bytes(), 4u);
  const int vocab_size = 50257 + data_test::kWideShift + 1;
  uint32_t first = 0, largest = 0;
  shard.visit([&](auto ids) {
    first = ids[0];
    largest = *std::max_element(ids.begin(), ids.end());
  });
  EXPECT_EQ(first, static_cast<uint32_t>(vocab_size - 1)) << "<|end_of_text|> before the first document";
  EXPECT_GT(largest, 65535u);

  const std::string args = "train --model llama --preset llama-tiny --train-data '" + tmp.path() +
                           "/data/w_train_*.bin' --batch 2 --seq 32 --sample-tokens 6 --threads 2 "
                           "--vocab-dir " +
                           vocab;
  // Without --vocab-size the model has GPT-2's 50,257 tokens, which the shards' ids pass: one line.
  auto small = run_mptrain(args + " --steps 4 --run-dir " + (tmp / "small"));
  EXPECT_NE(small.exit_code, 0);
  EXPECT_NE(small.output.find("is out of range for a vocabulary of 50257"), std::string::npos)
      << small.output;
  auto run = run_mptrain(args + " --steps 4 --vocab-size " + std::to_string(vocab_size) + " --run-dir " +
                         (tmp / "run"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("vocab 70258 padded to 70272"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("---- sample ----"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("samples as ids"), std::string::npos) << run.output;
  nlohmann::json config;
  std::ifstream(tmp / "run/step_00000004/config.json") >> config;
  EXPECT_EQ(config["vocab_size"], vocab_size);
  auto gen = run_mptrain("generate --checkpoint " + (tmp / "run/step_00000004") +
                         " --prompt 'The' --max-new-tokens 4 --seed 1 --vocab-dir " + vocab);
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_EQ(gen.output.rfind("The", 0), 0u) << gen.output;
  // --vocab-size against a checkpoint of another size is one line.
  auto other = run_mptrain(args + " --vocab-size 50257 --steps 5 --run-dir " + (tmp / "other") +
                           " --resume " + (tmp / "run/step_00000004"));
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("--vocab-size 50257: the model of"), std::string::npos) << other.output;
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
