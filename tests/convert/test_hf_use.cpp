// A model imported from a Hugging Face folder is usable everywhere a checkpoint is:
//  - `generate` samples from it, `eval` measures it
//  - `train --init-from` starts a fresh run from its weights: the first step's loss is the
//    imported model's loss on that batch, and the run counts from step 1
//  - `train --resume` refuses it (no optimizer state) with one clear error naming --init-from
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>
#include <regex>

#include "convert/convert_test_util.h"
#include "train/train_test_util.h"
#include "common/host_backend.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::expect_clear_error;
using testing::run_mptrain;
using testing::TempDir;

std::string vocab_dir() { return testing::gpt2_vocab_dir(); }

TEST(HfUse, ImportedModelGeneratesEvaluatesAndFineTunes) {
  if (!fs::exists(vocab_dir() + "/encoder.json"))
    GTEST_SKIP() << "GPT-2 vocabulary missing (scripts/setup.sh)";
  TempDir tmp;
  cpu::Context ctx;
  const Gpt2Config cfg = testing::small_gpt2_config(50257);  // GPT-2's vocabulary, so text works
  Gpt2 model(cfg, cpu_backend(ctx));
  testing::init_nontrivial(model, 8);
  // A folder as GPT2LMHeadModel.save_pretrained writes it: prefix, tied head, mask buffers absent.
  std::vector<testing::HfTensor> t = testing::hub_tensors(model);
  for (auto& x : t) x.name = "transformer." + x.name;
  fs::create_directories(tmp / "hf");
  testing::write_text(tmp / "hf/config.json", testing::hf_config_for(cfg).dump(2));
  testing::write_safetensors(tmp / "hf/model.safetensors", t);
  auto conv = run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "imported"));
  ASSERT_EQ(conv.exit_code, 0) << conv.output;

  auto gen = run_mptrain("generate --checkpoint " + (tmp / "imported") +
                         " --prompt 'Hello' --max-new-tokens 5 --seed 1 --vocab-dir " + vocab_dir());
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_EQ(gen.output.rfind("Hello", 0), 0u) << gen.output;
  // The same under the GPU's plan, run on the CPU (generate takes --device and --policy-of).
  auto gen_gpu_plan = run_mptrain("generate --checkpoint " + (tmp / "imported") +
                                  " --prompt 'Hello' --max-new-tokens 5 --seed 1 --precision bf16 --policy-of cuda"
                                  " --vocab-dir " + vocab_dir());
  ASSERT_EQ(gen_gpu_plan.exit_code, 0) << gen_gpu_plan.output;
  EXPECT_EQ(gen_gpu_plan.output.rfind("Hello", 0), 0u) << gen_gpu_plan.output;

  testing::write_small_shards(tmp.path());
  const std::string shape = " --batch 2 --seq 16 --threads 2";
  auto ev = run_mptrain("eval --checkpoint " + (tmp / "imported") + " --data '" + (tmp / "train_*.bin") +
                        "'" + shape + " --steps 1");
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(ev.output, m, std::regex("loss ([0-9.]+) \\| perplexity"))) << ev.output;
  const double eval_loss = std::stod(m[1]);

  auto ft =
      run_mptrain("train --init-from " + (tmp / "imported") + " --train-data '" + (tmp / "train_*.bin") +
                  "'" + shape + " --steps 3 --lr 1e-3 --sample-tokens 4 --run-dir " + (tmp / "run"));
  ASSERT_EQ(ft.exit_code, 0) << ft.output;
  EXPECT_NE(ft.output.find("initialised from the weights of"), std::string::npos) << ft.output;
  const auto losses = testing::read_losses(tmp / "run");
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_EQ(losses[0].first, 1);
  EXPECT_NEAR(losses[0].second, eval_loss, 2e-6 * eval_loss) << "step 1 trains on the imported weights";

  // Fine-tuning from the import works in every precision: step 1 is the imported weights' loss
  // up to that precision's rounding (bf16's 8-bit mantissa the loosest).
  for (const char* precision : {"tf32", "bf16", "fp16"}) {
    const fs::path run = tmp / (std::string("run_") + precision);
    auto lp = run_mptrain("train --init-from " + (tmp / "imported") + " --train-data '" + (tmp / "train_*.bin") +
                          "'" + shape + " --steps 2 --lr 1e-3 --sample-tokens 4 --precision " + precision +
                          " --run-dir " + run.string());
    ASSERT_EQ(lp.exit_code, 0) << precision << ": " << lp.output;
    const auto lp_losses = testing::read_losses(run);
    ASSERT_EQ(lp_losses.size(), 2u) << precision;
    EXPECT_NEAR(lp_losses[0].second, eval_loss, 2e-2 * eval_loss) << precision;
    EXPECT_TRUE(std::isfinite(lp_losses[1].second)) << precision;
  }

  // The fine-tuned run is a normal run: it resumes; the imported checkpoint does not.
  auto more = run_mptrain("train --resume " + (tmp / "run") + " --train-data '" + (tmp / "train_*.bin") +
                          "'" + shape + " --steps 4 --sample-tokens 4 --run-dir " + (tmp / "run"));
  ASSERT_EQ(more.exit_code, 0) << more.output;
  expect_clear_error(
      run_mptrain("train --resume " + (tmp / "imported") + " --train-data '" + (tmp / "train_*.bin") + "'" +
                  shape + " --steps 3 --run-dir " + (tmp / "run2")),
      "holds weights only (no optimizer state)");
  expect_clear_error(run_mptrain("train --resume " + (tmp / "run") + " --init-from " + (tmp / "imported") +
                                 " --train-data '" + (tmp / "train_*.bin") + "'" + shape +
                                 " --steps 3 --run-dir " + (tmp / "run3")),
                     "give one of them");
}

}  // namespace
}  // namespace mptrain
