// A Llama checkpoint to a Hugging Face LlamaForCausalLM folder and back (issue 40), as a user
// runs `mptrain convert`: the folder holds config.json, model.safetensors under the hub's names
// and GPT-2's tokenizer (vocab.json, merges.txt, tokenizer.json); imported again it is the same
// model (every tensor equal, the same eval loss) with the folder's tokenizer.json, which generate
// then reads by itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <vector>

#include "io/fileutil.h"
#include "io/safetensors.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::run_mptrain;
using testing::TempDir;

std::string eval_loss(const std::string& ckpt, const std::string& data) {
  auto ev = run_mptrain("eval --checkpoint " + ckpt + " --data '" + data +
                        "/val_*.bin' --batch 2 --seq 32 --steps 2 --threads 2");
  std::smatch m;
  return ev.exit_code == 0 && std::regex_search(ev.output, m, std::regex("loss ([0-9.]+) \\|")) ? m[1].str()
                                                                                                : ev.output;
}

TEST(LlamaConvert, ExportsAHuggingFaceFolderThatImportsBackUnchanged) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  auto train =
      run_mptrain("train --model llama --preset llama-tiny --train-data '" + tmp.path() +
                  "/train_*.bin' --batch 2 --seq 32 --steps 2 --threads 2 --run-dir " + (tmp / "run"));
  ASSERT_EQ(train.exit_code, 0) << train.output;

  auto out = run_mptrain("convert --to-hf " + (tmp / "run") + " -o " + (tmp / "hf") + " --vocab-dir " +
                         testing::gpt2_vocab_dir());
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("LlamaForCausalLM"), std::string::npos) << out.output;
  nlohmann::json config;
  std::ifstream(tmp / "hf/config.json") >> config;
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["num_key_value_heads"], 2);
  EXPECT_TRUE(std::ifstream(tmp / "hf/vocab.json").good());
  EXPECT_TRUE(std::ifstream(tmp / "hf/tokenizer.json").good());
  // A folder whose only tokenizer is tokenizer.json (as SmolLM-style folders ship) serves as the
  // vocabulary.
  std::filesystem::remove(tmp / "hf/vocab.json");
  std::filesystem::remove(tmp / "hf/merges.txt");
  // Its tokenizer_config.json names the end of text (transformers' AddedToken spelling).
  const std::string tokenizer_config =
      R"({"eos_token": {"__type": "AddedToken", "content": "<|endoftext|>"}})";
  std::ofstream(tmp / "hf/tokenizer_config.json") << tokenizer_config;
  SafetensorsFile hf(tmp / "hf/model.safetensors");
  EXPECT_EQ(hf.get("model.embed_tokens.weight").shape, (std::vector<int64_t>{50257, 64}));  // no padded rows

  auto in = run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "imported"));
  ASSERT_EQ(in.exit_code, 0) << in.output;
  EXPECT_NE(in.output.find("imported llama:"), std::string::npos) << in.output;
  SafetensorsFile a(tmp / "run/step_00000002/model.safetensors"), b(tmp / "imported/model.safetensors");
  ASSERT_EQ(a.names(), b.names());
  for (const std::string& name : a.names()) {
    const TensorView& t = a.get(name);
    std::vector<float> x(t.numel()), y(t.numel());
    a.read_f32(name, t.shape, x.data());
    b.read_f32(name, t.shape, y.data());
    EXPECT_EQ(x, y) << name;
  }
  EXPECT_EQ(eval_loss(tmp / "imported", tmp.path()), eval_loss(tmp / "run", tmp.path()));
  // The import keeps the folder's tokenizer.json, which generate reads without --vocab-dir.
  EXPECT_TRUE(std::ifstream(tmp / "imported/tokenizer.json").good());
  EXPECT_EQ(read_file(tmp / "imported/tokenizer_config.json"), tokenizer_config);
  auto again = run_mptrain("convert --to-hf " + (tmp / "imported") + " -o " + (tmp / "hf2"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(read_file(tmp / "hf2/tokenizer_config.json"), tokenizer_config) << "export writes it back";
  EXPECT_EQ(read_file(tmp / "hf2/tokenizer.json"), read_file(tmp / "hf/tokenizer.json"));
  auto gen = run_mptrain("generate --checkpoint " + (tmp / "imported") +
                         " --prompt 'The' --max-new-tokens 3 --seed 1");
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_EQ(gen.output.rfind("The", 0), 0u) << gen.output;
  // train --init-from the Hugging Face folder imports it and fine-tunes it.
  auto ft = run_mptrain("train --model llama --init-from " + (tmp / "hf") + " --train-data '" + tmp.path() +
                        "/train_*.bin' --batch 2 --seq 32 --steps 2 --threads 2 --run-dir " + (tmp / "ft"));
  ASSERT_EQ(ft.exit_code, 0) << ft.output;
  EXPECT_NE(ft.output.find("imported the Hugging Face folder"), std::string::npos) << ft.output;
  EXPECT_NE(ft.output.find("(LlamaForCausalLM)"), std::string::npos) << ft.output;
  // The fine-tuned checkpoints keep the folder's tokenizer, which its export writes back.
  EXPECT_EQ(read_file(tmp / "ft/step_00000002/tokenizer.json"), read_file(tmp / "hf/tokenizer.json"));
  EXPECT_EQ(read_file(tmp / "ft/step_00000002/tokenizer_config.json"), tokenizer_config);
  auto ft_out = run_mptrain("convert --to-hf " + (tmp / "ft") + " -o " + (tmp / "hf3"));
  ASSERT_EQ(ft_out.exit_code, 0) << ft_out.output;
  EXPECT_EQ(read_file(tmp / "hf3/tokenizer.json"), read_file(tmp / "hf/tokenizer.json"));
  EXPECT_EQ(read_file(tmp / "hf3/tokenizer_config.json"), tokenizer_config);
  auto gen_hf = run_mptrain("generate --checkpoint " + (tmp / "run") +
                            " --prompt 'The' --max-new-tokens 3 --seed 1 "
                            "--vocab-dir " +
                            (tmp / "hf"));
  ASSERT_EQ(gen_hf.exit_code, 0) << gen_hf.output;
  EXPECT_EQ(gen_hf.output, gen.output);  // the same model, the same tokenizer, the same seed
}

}  // namespace
}  // namespace mptrain
