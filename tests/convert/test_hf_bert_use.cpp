// A BERT imported from a Hugging Face folder is usable everywhere a BERT checkpoint is:
//  - `fill-mask` predicts with it (the folder's vocab.txt came along)
//  - `eval` measures MLM and NSP accuracy on an instance file
//  - `train --model bert --init-from` starts a fresh run from its weights: the first step's
//    loss is the imported model's loss on that batch (recomputed here with the trainer's
//    loader and masking seed), and the run counts from step 1
//  - `train --resume` of it fails with one clear error (it holds no optimizer state)
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>

#include "convert/bert_convert_test_util.h"
#include "data/bert_loader.h"
#include "train/train_test_util.h"
#include "common/host_backend.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::expect_clear_error;
using testing::run_mptrain;
using testing::TempDir;

TEST(HfBertUse, ImportedModelFillsMasksEvaluatesAndFineTunes) {
  TempDir tmp;
  cpu::Context ctx;
  const BertConfig cfg = testing::small_bert_config();
  Bert model(cfg, cpu_backend(ctx));
  testing::init_nontrivial(model, 8);
  // A folder as BertForPreTraining.save_pretrained + BertTokenizer.save_pretrained write it.
  fs::create_directories(tmp / "hf");
  testing::write_text(tmp / "hf/config.json", testing::hf_bert_config_for(cfg).dump(2));
  testing::write_safetensors(tmp / "hf/model.safetensors", testing::bert_hub_tensors(model));
  testing::write_text(tmp / "hf/vocab.txt", testing::small_bert_vocab_text());
  testing::write_text(tmp / "hf/tokenizer_config.json", R"({"do_lower_case": true, "tokenizer_class": "BertTokenizer"})");
  auto conv = run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "imported"));
  ASSERT_EQ(conv.exit_code, 0) << conv.output;

  auto fill = run_mptrain("fill-mask --checkpoint " + (tmp / "imported") + " -k 3 --threads 2 'the [MASK] sat on the mat'");
  ASSERT_EQ(fill.exit_code, 0) << fill.output;
  EXPECT_NE(fill.output.find("the [MASK] sat on the mat"), std::string::npos) << fill.output;
  EXPECT_NE(fill.output.find("   3  "), std::string::npos) << "three predictions: " << fill.output;
  // fill-mask takes --device and --policy-of: the GPU's plan, run on the CPU.
  auto fill_gpu_plan = run_mptrain("fill-mask --checkpoint " + (tmp / "imported") +
                                   " -k 3 --threads 2 --precision bf16 --policy-of cuda 'the [MASK] sat on the mat'");
  ASSERT_EQ(fill_gpu_plan.exit_code, 0) << fill_gpu_plan.output;
  EXPECT_NE(fill_gpu_plan.output.find("   3  "), std::string::npos) << fill_gpu_plan.output;

  testing::write_small_bert_instances(tmp / "data.bert");
  auto ev = run_mptrain("eval --checkpoint " + (tmp / "imported") + " --data " + (tmp / "data.bert") +
                        " --batch 8 --steps 2 --threads 2");
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  EXPECT_NE(ev.output.find("mlm accuracy"), std::string::npos) << ev.output;
  EXPECT_NE(ev.output.find("nsp accuracy"), std::string::npos) << ev.output;

  const int B = 8, max_pred = 4;
  const uint64_t seed = 5;
  auto ft = run_mptrain("train --model bert --init-from " + (tmp / "imported") + " --data " + (tmp / "data.bert") +
                        " --batch 8 --steps 2 --lr 1e-3 --warmup 1 --max-predictions 4 --seed 5 --threads 2"
                        " --progress lines --run-dir " + (tmp / "run"));
  ASSERT_EQ(ft.exit_code, 0) << ft.output;
  EXPECT_NE(ft.output.find("initialised from the weights of"), std::string::npos) << ft.output;
  EXPECT_NE(ft.output.find("vocab 100 padded to 128"), std::string::npos) << ft.output;
  const auto losses = testing::read_losses(tmp / "run");
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_EQ(losses[0].first, 1);
  EXPECT_EQ(losses[1].first, 2);

  // Step 1's loss is the imported weights' loss on the trainer's first batch.
  BertMaskingOptions masking;
  masking.max_predictions = max_pred;
  masking.seed = seed;
  const int T = 16;  // the instance file's max_seq_len
  BertLoader loader(tmp / "data.bert", B, T, cfg.vocab_size, masking);
  BertBatch batch;
  loader.next(batch);
  Bert imported(load_bert_checkpoint_config(tmp / "imported"), cpu_backend(ctx));
  load_bert_checkpoint_model(tmp / "imported", imported);
  imported.plan(B, T, B * max_pred);
  const BertStats st = imported.forward({batch.input_ids.data(), batch.token_type_ids.data(),
                                         batch.attention_mask.data(), batch.mlm_labels.data(),
                                         batch.nsp_labels.data()},
                                        B, T);
  EXPECT_NEAR(losses[0].second, st.loss(), 1e-5 * st.loss()) << "step 1 trains on the imported weights";

  // Fine-tuning from the import works in every precision: step 1 is the same loss up to that
  // precision's rounding (bf16's 8-bit mantissa the loosest).
  for (const char* precision : {"tf32", "bf16", "fp16"}) {
    const fs::path run = tmp / (std::string("run_") + precision);
    auto lp = run_mptrain("train --model bert --init-from " + (tmp / "imported") + " --data " + (tmp / "data.bert") +
                          " --batch 8 --steps 2 --lr 1e-3 --warmup 1 --max-predictions 4 --seed 5 --threads 2"
                          " --progress lines --precision " + precision + " --run-dir " + run.string());
    ASSERT_EQ(lp.exit_code, 0) << precision << ": " << lp.output;
    const auto lp_losses = testing::read_losses(run);
    ASSERT_EQ(lp_losses.size(), 2u) << precision;
    EXPECT_NEAR(lp_losses[0].second, st.loss(), 2e-2 * st.loss()) << precision;
    EXPECT_TRUE(std::isfinite(lp_losses[1].second)) << precision;
  }

  // The imported checkpoint holds weights only: --resume cannot continue it.
  const auto resume = run_mptrain("train --model bert --resume " + (tmp / "imported") + " --data " +
                                  (tmp / "data.bert") + " --batch 8 --steps 3 --threads 2 --run-dir " + (tmp / "run2"));
  expect_clear_error(resume, "optimizer");
}

}  // namespace
}  // namespace mptrain
