// BERT export to a Hugging Face folder and back, as a user runs it (`mptrain convert`):
//  - a trainer's BERT checkpoint → HF folder → mptrain checkpoint is bit-exact, tensor by tensor,
//    with the same metadata, vocabulary and casing
//  - the HF folder is what BertForPreTraining.from_pretrained and BertTokenizer read: BertConfig
//    fields, BertForPreTraining names and [out, in] shapes, no padded vocabulary rows, no tied
//    decoder, metadata {"format": "pt"}, vocab.txt and tokenizer_config.json
//  - an independent PyTorch BertForPreTraining (tests/ref/hf_bert_logits.py over
//    bert_reference.py) that reads the exported file by its HF names computes mptrain's MLM and
//    NSP logits (fp32, norm-wise relative error < 1e-5)
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "convert/bert_convert_test_util.h"
#include "io/fileutil.h"
#include "common/host_backend.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::run_mptrain;
using testing::TempDir;

TEST(HfBertRoundTrip, CheckpointToHfAndBackIsBitExact) {
  TempDir tmp;
  cpu::Context ctx;
  const BertConfig cfg = testing::small_bert_config();
  Bert model(cfg, cpu_backend(ctx));
  testing::init_nontrivial(model, 3);
  const std::string ckpt = testing::save_bert_run_checkpoint(tmp / "run", model, 5, /*lower_case=*/false);

  auto to_hf = run_mptrain("convert --to-hf " + (tmp / "run") + " -o " + (tmp / "hf"));
  ASSERT_EQ(to_hf.exit_code, 0) << to_hf.output;
  EXPECT_NE(to_hf.output.find("step_00000005"), std::string::npos) << to_hf.output;  // through 'latest'
  EXPECT_NE(to_hf.output.find("BertForPreTraining"), std::string::npos) << to_hf.output;

  // The folder as Hugging Face reads it.
  SafetensorsFile hf(tmp / "hf/model.safetensors");
  EXPECT_EQ(hf.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  std::vector<std::string> names;
  for (const auto& spec : model.table().specs()) names.push_back(spec.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(hf.names(), names);  // "bert." names, no cls.predictions.decoder.* (tied), no buffers
  EXPECT_EQ(hf.get("bert.embeddings.word_embeddings.weight").shape,
            (std::vector<int64_t>{100, 32}));  // padded rows (to 128) removed
  EXPECT_EQ(hf.get("cls.predictions.bias").shape, (std::vector<int64_t>{100}));
  EXPECT_EQ(hf.get("bert.encoder.layer.1.intermediate.dense.weight").shape,
            (std::vector<int64_t>{48, 32}));  // nn.Linear [out, in]
  EXPECT_EQ(hf.get("bert.encoder.layer.0.output.dense.weight").shape, (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(hf.get("cls.seq_relationship.weight").shape, (std::vector<int64_t>{2, 32}));
  for (const auto& name : hf.names()) EXPECT_EQ(hf.get(name).dtype, DType::F32) << name;

  const auto config = nlohmann::json::parse(read_file(tmp / "hf/config.json"));
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"BertForPreTraining"}));
  EXPECT_EQ(config["model_type"], "bert");
  EXPECT_EQ(config["vocab_size"], 100);  // the real V
  EXPECT_EQ(config["hidden_size"], 32);
  EXPECT_EQ(config["num_hidden_layers"], 2);
  EXPECT_EQ(config["num_attention_heads"], 2);
  EXPECT_EQ(config["intermediate_size"], 48);
  EXPECT_EQ(config["hidden_act"], "gelu");
  EXPECT_EQ(config["max_position_embeddings"], 24);
  EXPECT_EQ(config["type_vocab_size"], 3);
  EXPECT_EQ(config["pad_token_id"], 0);
  EXPECT_NEAR(config["layer_norm_eps"].get<double>(), 1e-12, 1e-18);
  EXPECT_NEAR(config["initializer_range"].get<double>(), 0.02, 1e-9);

  // The tokenizer files BertTokenizer reads: the checkpoint's vocabulary and casing.
  EXPECT_EQ(read_file(tmp / "hf/vocab.txt"), testing::small_bert_vocab_text());
  const auto tok = nlohmann::json::parse(read_file(tmp / "hf/tokenizer_config.json"));
  EXPECT_EQ(tok["do_lower_case"], false);
  EXPECT_EQ(tok["tokenizer_class"], "BertTokenizer");
  EXPECT_EQ(tok["model_max_length"], 24);

  auto from_hf = run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "back"));
  ASSERT_EQ(from_hf.exit_code, 0) << from_hf.output;
  EXPECT_NE(from_hf.output.find("vocab 100 padded to 128"), std::string::npos) << from_hf.output;
  EXPECT_NE(from_hf.output.find("(100 tokens, cased)"), std::string::npos) << from_hf.output;
  SafetensorsFile a(ckpt + "/model.safetensors"), b(tmp / "back/model.safetensors");
  testing::expect_same_tensors(a, b);
  EXPECT_EQ(a.metadata(), b.metadata());  // format, mptrain_model, mptrain_config (Vp 128)
  EXPECT_EQ(read_file(tmp / "back/vocab.txt"), read_file(ckpt + "/vocab.txt"));
  EXPECT_FALSE(bert_checkpoint_lower_case(tmp / "back"));

  // A weights-only checkpoint at step 0 that the trainer's loaders read.
  EXPECT_FALSE(fs::exists(tmp / "back/optimizer.safetensors"));
  EXPECT_EQ(resolve_checkpoint(tmp / "back"), tmp / "back");  // checksums verified
  EXPECT_TRUE(is_bert_checkpoint(tmp / "back"));
  EXPECT_EQ(load_bert_checkpoint_state(tmp / "back").step, 0);
  const BertConfig back = load_bert_checkpoint_config(tmp / "back");
  EXPECT_EQ(back.padded_vocab_size, 128);
  EXPECT_EQ(back.intermediate, 48);
  EXPECT_EQ(back.type_vocab_size, 3);
  EXPECT_EQ(back.ln_eps, cfg.ln_eps);
  Bert loaded(back, cpu_backend(ctx));
  load_bert_checkpoint_model(tmp / "back", loaded);
  EXPECT_EQ(std::memcmp(loaded.params().data(), model.params().data(), model.num_params() * sizeof(float)), 0)
      << "every parameter, padded rows (zero) included";
}

// Three sequences of 13 (straddling vector widths): padding, every token type of the config,
// every real position but [CLS] predicted, both NSP labels.
struct ReferenceBatch {
  static constexpr int B = 3, T = 13;
  std::vector<int> ids, types, mask, mlm, nsp{0, 1, 1};
  ReferenceBatch(int vocab, int type_vocab) : ids(B * T), types(B * T), mask(B * T), mlm(B * T, -1) {
    for (int b = 0; b < B; ++b) {
      const int len = T - 3 * b;
      for (int t = 0; t < T; ++t) {
        const int i = b * T + t;
        mask[i] = t < len ? 1 : 0;
        ids[i] = t == 0 ? 2 : t < len ? 5 + (i * 37 + 11) % 95 : 0;
        types[i] = t < len ? (t * type_vocab) / len : 0;
        if (t > 0 && t < len) mlm[i] = (i * 13) % vocab;
      }
    }
  }
  void write(const std::string& path) const {
    SafetensorsWriter in;
    in.add("input_ids", DType::I32, {B, T}, ids.data());
    in.add("token_type_ids", DType::I32, {B, T}, types.data());
    in.add("attention_mask", DType::I32, {B, T}, mask.data());
    in.add("mlm_labels", DType::I32, {B, T}, mlm.data());
    in.add("nsp_labels", DType::I32, {B}, nsp.data());
    in.write(path);
  }
  BertInputs inputs(bool with_nsp) const {
    return {ids.data(), types.data(), mask.data(), mlm.data(), with_nsp ? nsp.data() : nullptr};
  }
};

// tests/ref/hf_bert_logits.py over the folder hf_dir on ReferenceBatch, against `model`'s own
// logits and losses (the NSP ones only where the model has the head).
void expect_pytorch_agrees(Bert& model, const std::string& hf_dir, const std::string& tmp) {
  const BertConfig& cfg = model.config();
  const ReferenceBatch batch(cfg.vocab_size, cfg.type_vocab_size);
  const int B = ReferenceBatch::B, T = ReferenceBatch::T;
  batch.write(tmp + "/in.safetensors");
  auto run =
      testing::run_command("/usr/bin/python3 " + testing::source_dir() + "/tests/ref/hf_bert_logits.py " +
                           hf_dir + " " + tmp + "/in.safetensors " + tmp + "/out.safetensors");
  ASSERT_EQ(run.exit_code, 0) << run.output;

  model.plan(B, T);
  const BertStats st = model.forward(batch.inputs(cfg.nsp), B, T);
  const int V = cfg.vocab_size, Vp = cfg.padded_vocab_size, M = st.mlm_count;
  ASSERT_EQ(M, 27);
  std::vector<float> ours(static_cast<size_t>(M) * V), theirs(ours.size());
  for (int m = 0; m < M; ++m)
    for (int v = 0; v < V; ++v)
      ours[static_cast<size_t>(m) * V + v] = model.mlm_logits()[static_cast<size_t>(m) * Vp + v];
  SafetensorsFile ref(tmp + "/out.safetensors");
  ref.read_f32("mlm_logits", std::vector<int64_t>{M, V}, theirs.data());
  const double mlm_err = testing::relative_error(ours.data(), theirs.data(), ours.size());
  float losses[2];
  ref.read_f32("mlm_loss", std::vector<int64_t>{1}, &losses[0]);
  ref.read_f32("nsp_loss", std::vector<int64_t>{1}, &losses[1]);
  char text[64];
  std::snprintf(text, sizeof(text), "%.3e", mlm_err);
  ::testing::Test::RecordProperty("mlm_logits_relative_error", text);
  EXPECT_LT(mlm_err, 1e-5);
  EXPECT_NEAR(st.mlm_loss, losses[0], 1e-5 * losses[0]);
  if (!cfg.nsp) {
    EXPECT_EQ(ref.get("nsp_logits").shape, (std::vector<int64_t>{0, 2}));
    EXPECT_EQ(losses[1], 0.0f);
    std::printf("MLM-only: MLM logits relative error %.3e (M = %d masked positions)\n", mlm_err, M);
    return;
  }
  std::vector<float> nsp_ours(model.nsp_logits(), model.nsp_logits() + 2 * B), nsp_theirs(2 * B);
  ref.read_f32("nsp_logits", std::vector<int64_t>{B, 2}, nsp_theirs.data());
  const double nsp_err = testing::relative_error(nsp_ours.data(), nsp_theirs.data(), nsp_ours.size());
  std::snprintf(text, sizeof(text), "%.3e", nsp_err);
  ::testing::Test::RecordProperty("nsp_logits_relative_error", text);
  EXPECT_LT(nsp_err, 1e-5);
  EXPECT_NEAR(st.nsp_loss, losses[1], 1e-5 * losses[1]);
  std::printf("MLM logits relative error %.3e, NSP logits %.3e (M = %d masked positions)\n", mlm_err, nsp_err,
              M);
}

TEST(HfBertRoundTrip, PyTorchReadsTheExportedFolderAndComputesTheSameMlmAndNspLogits) {
  if (!testing::have_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch and numpy is not installed";
  TempDir tmp;
  cpu::Context ctx;
  // Weights of std 0.2 instead of 0.02: every branch (attention included) then moves the
  // logits enough that a swapped or transposed tensor shows far above the tolerance.
  BertConfig cfg = testing::small_bert_config();
  cfg.init_std = 0.2f;
  Bert model(cfg, cpu_backend(ctx));
  testing::init_nontrivial(model, 11);
  testing::save_bert_run_checkpoint(tmp / "run", model, 1);
  auto to_hf = run_mptrain("convert --to-hf " + (tmp / "run") + " -o " + (tmp / "hf"));
  ASSERT_EQ(to_hf.exit_code, 0) << to_hf.output;
  expect_pytorch_agrees(model, tmp / "hf", tmp.path());
}

// An MLM-only run (--no-nsp, 30% masking, unpadded batches) exports a BertForMaskedLM folder:
// its class's tensors only (no pooler, no NSP head), which PyTorch reads and runs to mptrain's
// MLM logits; imported back, it is an MLM-only checkpoint again.
TEST(HfBertRoundTrip, MlmOnlyRunExportsABertForMaskedLm) {
  if (!testing::have_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch and numpy is not installed";
  TempDir tmp;
  testing::write_small_bert_instances(tmp / "data.bert");
  auto train = run_mptrain("train --model bert --no-nsp --mask-rate 0.3 --preset bert-tiny --data " +
                           (tmp / "data.bert") +
                           " --batch 8 --steps 3 --lr 3e-3 --warmup 1 --threads 2"
                           " --progress lines --run-dir " +
                           (tmp / "run"));
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_NE(train.output.find("BertForMaskedLM"), std::string::npos) << train.output;
  EXPECT_NE(train.output.find("MLM only, 30% of tokens masked"), std::string::npos) << train.output;
  EXPECT_EQ(train.output.find("nsp"), std::string::npos) << "no NSP column: " << train.output;
  auto to_hf = run_mptrain("convert --to-hf " + (tmp / "run") + " -o " + (tmp / "hf"));
  ASSERT_EQ(to_hf.exit_code, 0) << to_hf.output;
  EXPECT_NE(to_hf.output.find("BertForMaskedLM"), std::string::npos) << to_hf.output;
  const auto config = nlohmann::json::parse(read_file(tmp / "hf/config.json"));
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"BertForMaskedLM"}));
  SafetensorsFile hf(tmp / "hf/model.safetensors");
  EXPECT_FALSE(hf.contains("bert.pooler.dense.weight"));
  EXPECT_FALSE(hf.contains("cls.seq_relationship.weight"));

  const std::string ckpt = resolve_checkpoint(tmp / "run");
  cpu::Context ctx;
  Bert model(load_bert_checkpoint_config(ckpt), cpu_backend(ctx));
  ASSERT_FALSE(model.config().nsp);
  load_bert_checkpoint_model(ckpt, model);
  expect_pytorch_agrees(model, tmp / "hf", tmp.path());

  auto back = run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "back"));
  ASSERT_EQ(back.exit_code, 0) << back.output;
  EXPECT_NE(back.output.find("BertForMaskedLM"), std::string::npos) << back.output;
  EXPECT_FALSE(load_bert_checkpoint_config(tmp / "back").nsp);
  testing::expect_same_tensors(SafetensorsFile(ckpt + "/model.safetensors"),
                               SafetensorsFile(tmp / "back/model.safetensors"));
  // A model with the NSP head cannot be trained MLM-only: one clear error.
  Bert with_nsp(testing::small_bert_config(), cpu_backend(ctx));
  testing::init_nontrivial(with_nsp, 2);
  const std::string nsp_ckpt = testing::save_bert_run_checkpoint(tmp / "nsp_run", with_nsp, 1);
  testing::expect_clear_error(
      run_mptrain("train --model bert --no-nsp --init-from " + nsp_ckpt + " --data " + (tmp / "data.bert") +
                  " --batch 8 --steps 1 --threads 2 --run-dir " + (tmp / "r2")),
      "has the NSP head");
}

// A fine-tuned classifier exports Hugging Face's BertForSequenceClassification: config.json with
// id2label / label2id, the pooler and classifier.* and no pretraining heads; PyTorch reads it and
// computes mptrain's classifier logits and loss; imported back, the tensors and the label names
// are the same.
TEST(HfBertRoundTrip, ClassifierExportsABertForSequenceClassification) {
  if (!testing::have_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch and numpy is not installed";
  TempDir tmp;
  cpu::Context ctx;
  BertConfig cfg = testing::small_bert_config();
  cfg.init_std = 0.2f;
  cfg.nsp = false;
  cfg.num_labels = 3;
  Bert model(cfg, cpu_backend(ctx));
  testing::init_nontrivial(model, 5);
  BertTrainState state;
  state.step = 4;
  state.vocab_text = testing::small_bert_vocab_text();
  state.labels = {"negative", "neutral", "positive"};
  save_bert_weights(tmp / "best", model, state);
  auto to_hf = run_mptrain("convert --to-hf " + (tmp / "best") + " -o " + (tmp / "hf"));
  ASSERT_EQ(to_hf.exit_code, 0) << to_hf.output;
  EXPECT_NE(to_hf.output.find("BertForSequenceClassification"), std::string::npos) << to_hf.output;
  const auto config = nlohmann::json::parse(read_file(tmp / "hf/config.json"));
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"BertForSequenceClassification"}));
  EXPECT_EQ(config["id2label"]["2"], "positive");
  EXPECT_EQ(config["label2id"]["neutral"], 1);
  SafetensorsFile hf(tmp / "hf/model.safetensors");
  EXPECT_EQ(hf.get("classifier.weight").shape, (std::vector<int64_t>{3, 32}));
  EXPECT_TRUE(hf.contains("bert.pooler.dense.weight"));
  for (const auto& name : hf.names()) EXPECT_FALSE(name.starts_with("cls.")) << name;

  const ReferenceBatch batch(cfg.vocab_size, cfg.type_vocab_size);
  const int B = ReferenceBatch::B, T = ReferenceBatch::T;
  batch.write(tmp / "in.safetensors");
  auto run = testing::run_command("/usr/bin/python3 " + testing::source_dir() + "/tests/ref/hf_bert_logits.py " +
                                  (tmp / "hf") + " " + (tmp / "in.safetensors") + " " + (tmp / "out.safetensors"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  model.plan(B, T);
  const BertInputs in{batch.ids.data(), batch.types.data(), batch.mask.data(), nullptr, batch.nsp.data()};
  const BertStats st = model.forward(in, B, T);
  std::vector<float> ours(model.nsp_logits(), model.nsp_logits() + 3 * B), theirs(3 * B);
  SafetensorsFile ref(tmp / "out.safetensors");
  ref.read_f32("nsp_logits", std::vector<int64_t>{B, 3}, theirs.data());
  float loss = 0.0f;
  ref.read_f32("nsp_loss", std::vector<int64_t>{1}, &loss);
  const double err = testing::relative_error(ours.data(), theirs.data(), ours.size());
  std::printf("classifier logits relative error %.3e, loss %.6f vs PyTorch %.6f\n", err, st.nsp_loss, loss);
  EXPECT_LT(err, 1e-5);
  EXPECT_NEAR(st.nsp_loss, loss, 1e-5 * loss);

  auto back = run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "back"));
  ASSERT_EQ(back.exit_code, 0) << back.output;
  EXPECT_EQ(load_bert_checkpoint_config(tmp / "back").num_labels, 3);
  EXPECT_EQ(bert_checkpoint_labels(tmp / "back"), state.labels);
  testing::expect_same_tensors(SafetensorsFile(tmp / "best/model.safetensors"),
                               SafetensorsFile(tmp / "back/model.safetensors"));
}

}  // namespace
}  // namespace mptrain
