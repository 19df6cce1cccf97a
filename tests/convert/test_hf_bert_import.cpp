// `mptrain convert --from-hf` on hand-built BertForPreTraining folders:
//  - every naming variant loads with the exact stored values: with and without the "bert."
//    prefix, TF-converted LayerNorm gamma/beta, the tied decoder weight present or absent,
//    cls.predictions.decoder.bias beside or instead of cls.predictions.bias, the position_ids /
//    token_type_ids buffers, F16 and BF16 tensors; padded vocabulary rows are zero
//  - the vocabulary: the folder's vocab.txt and tokenizer_config.json's do_lower_case, --vocab
//    instead, or none (the weights still import)
//  - every broken folder gives one clear error line, a non-zero exit, and no output folder:
//    corrupt header, overlapping offsets, missing tensor, wrong shape, a decoder weight that
//    differs from the word embeddings, unknown tensors, unsupported settings, bad vocab.txt
#include <gtest/gtest.h>

#include <filesystem>

#include "convert/bert_convert_test_util.h"
#include "io/fileutil.h"
#include "common/host_backend.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::expect_clear_error;
using testing::HfTensor;
using testing::run_mptrain;
using testing::TempDir;

struct Variant {
  const char* what;
  bool prefix;       // "bert." on the body's names
  bool gamma_beta;   // LayerNorm .gamma/.beta instead of .weight/.bias
  bool decoder;      // cls.predictions.decoder.weight (equal to the word embeddings)
  int decoder_bias;  // 0: cls.predictions.bias only; 1: and decoder.bias; 2: decoder.bias only
  bool buffers;      // bert.embeddings.position_ids / token_type_ids (I64)
  DType dtype;
};

class HfBertImport : public ::testing::Test {
 protected:
  HfBertImport() : model_(cfg_, cpu_backend(ctx_)) { testing::init_nontrivial(model_, 21); }

  // The model's tensors as a variant names and stores them.
  std::vector<HfTensor> tensors(const Variant& v) const {
    std::vector<HfTensor> out;
    for (auto t : testing::bert_hub_tensors(model_)) {
      if (!v.prefix && t.name.rfind("bert.", 0) == 0) t.name.erase(0, 5);
      if (v.gamma_beta && t.name.find("LayerNorm.") != std::string::npos) {
        if (t.name.ends_with(".weight")) t.name.replace(t.name.size() - 6, 6, "gamma");
        if (t.name.ends_with(".bias")) t.name.replace(t.name.size() - 4, 4, "beta");
      }
      t.dtype = v.dtype;
      if (t.name == "cls.predictions.bias" && v.decoder_bias >= 1) {
        HfTensor d = t;
        d.name = "cls.predictions.decoder.bias";
        out.push_back(d);
        if (v.decoder_bias == 2) continue;
      }
      out.push_back(t);
    }
    if (v.decoder) {
      HfTensor d = out.front();  // the word embeddings, stored alike
      d.name = "cls.predictions.decoder.weight";
      out.push_back(d);
    }
    return out;
  }

  // Writes the folder: config.json, model.safetensors (plus I64 buffers), vocab.txt unless told not to.
  std::string write_folder(const std::string& dir, const std::vector<HfTensor>& t,
                           const nlohmann::json& config, bool buffers = false, bool vocab = true) const {
    fs::create_directories(dir);
    testing::write_text(dir + "/config.json", config.dump(2));
    SafetensorsWriter w;
    for (const auto& x : t) {
      if (x.dtype == DType::F32) {
        w.add_copy(x.name, DType::F32, x.shape, x.values.data());
      } else {
        std::vector<uint16_t> bits(x.values.size());
        for (size_t i = 0; i < bits.size(); ++i)
          bits[i] = x.dtype == DType::F16 ? f32_to_f16(x.values[i]).bits : f32_to_bf16(x.values[i]).bits;
        w.add_copy(x.name, x.dtype, x.shape, bits.data());
      }
    }
    if (buffers) {
      const int64_t P = cfg_.max_position;
      std::vector<int64_t> pos(P), zeros(P, 0);
      for (int64_t i = 0; i < P; ++i) pos[i] = i;
      w.add_copy("bert.embeddings.position_ids", DType::I64, {1, P}, pos.data());
      w.add_copy("bert.embeddings.token_type_ids", DType::I64, {1, P}, zeros.data());
    }
    w.set_metadata("format", "pt");
    w.write(dir + "/model.safetensors");
    if (vocab) testing::write_text(dir + "/vocab.txt", testing::small_bert_vocab_text());
    return dir;
  }
  std::string write_folder(const std::string& dir, const std::vector<HfTensor>& t) const {
    return write_folder(dir, t, testing::hf_bert_config_for(cfg_));
  }
  std::vector<HfTensor> plain() const { return tensors({"", true, false, false, 0, false, DType::F32}); }

  // Converts a broken folder: one clear error, and nothing left under the output name.
  void expect_import_error(const std::string& hf_dir, const std::string& needle,
                           const std::string& flags = "") const {
    const std::string out = hf_dir + "-out";
    expect_clear_error(run_mptrain("convert --from-hf " + hf_dir + " -o " + out + flags), needle);
    EXPECT_FALSE(fs::exists(out)) << out;
    for (const auto& e : fs::directory_iterator(fs::path(hf_dir).parent_path()))
      EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos)
          << "left behind: " << e.path();
  }

  cpu::Context ctx_;
  BertConfig cfg_ = testing::small_bert_config();
  Bert model_;
};

TEST_F(HfBertImport, EveryNamingVariantAndDtypeLoads) {
  const Variant variants[] = {
      {"save_pretrained: prefix, no decoder", true, false, false, 0, false, DType::F32},
      {"bare body names", false, false, false, 0, false, DType::F32},
      {"TF-converted: gamma/beta, decoder, buffers", true, true, true, 1, true, DType::F32},
      {"decoder.bias instead of cls.predictions.bias", true, false, false, 2, false, DType::F32},
      {"no prefix, decoder weight and both biases", false, false, true, 1, true, DType::F32},
      {"fp16 with gamma/beta", true, true, false, 0, true, DType::F16},
      {"bf16 with decoder", false, false, true, 2, false, DType::BF16},
  };
  for (const auto& v : variants) {
    SCOPED_TRACE(v.what);
    TempDir tmp;
    const auto t = tensors(v);
    write_folder(tmp / "hf", t, testing::hf_bert_config_for(cfg_), v.buffers);
    auto r = run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "out"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("imported bert"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(std::string(dtype_name(v.dtype))), std::string::npos) << r.output;
    auto expect_said = [&](bool when, const std::string& what) {
      if (when) {
        EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
      }
    };
    expect_said(v.buffers, "2 buffer(s) ignored");
    expect_said(v.decoder, "cls.predictions.decoder.weight checked equal");
    expect_said(v.decoder_bias == 1, "cls.predictions.decoder.bias checked equal");
    expect_said(v.decoder_bias == 2, "cls.predictions.decoder.bias read as");

    // Every parameter holds exactly the values the file stores, padded rows zero.
    ASSERT_TRUE(is_bert_checkpoint(tmp / "out"));
    const BertConfig c = load_bert_checkpoint_config(tmp / "out");
    EXPECT_EQ(c.vocab_size, 100);
    EXPECT_EQ(c.padded_vocab_size, 128);
    EXPECT_EQ(c.intermediate, 48);
    Bert loaded(c, cpu_backend(ctx_));
    load_bert_checkpoint_model(tmp / "out", loaded);
    for (const auto& spec : model_.table().specs()) {
      std::vector<float> want(spec.numel, 0.0f);
      const std::vector<float> stored =
          HfTensor{spec.name, spec.hf_shape,
                   std::vector<float>(model_.params().data() + spec.offset,
                                      model_.params().data() + spec.offset + spec.hf_numel()),
                   v.dtype}
              .stored();
      std::copy(stored.begin(), stored.end(), want.begin());
      EXPECT_EQ(std::memcmp(loaded.params().data() + spec.offset, want.data(), spec.numel * sizeof(float)), 0)
          << spec.name;
    }
    EXPECT_EQ(read_file(tmp / "out/vocab.txt"), testing::small_bert_vocab_text());
    EXPECT_TRUE(
        bert_checkpoint_lower_case(tmp / "out"));  // BertTokenizer's default without tokenizer_config.json
  }
}

TEST_F(HfBertImport, AnyBertArchitectureLoadsWithTheHeadsItsFileHolds) {
  TempDir tmp;
  // The hub's bert-base-uncased: architectures BertForMaskedLM, a file with both heads.
  nlohmann::json config = testing::hf_bert_config_for(cfg_);
  config["architectures"] = {"BertForMaskedLM"};
  write_folder(tmp / "mlm", plain(), config);
  auto r = run_mptrain("convert --from-hf " + (tmp / "mlm") + " -o " + (tmp / "out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(load_bert_checkpoint_config(tmp / "out").nsp);
  // A file without the pooler and NSP head (BertForMaskedLM.save_pretrained) is an MLM-only model.
  auto t = plain();
  std::erase_if(t, [](const HfTensor& x) {
    return x.name.starts_with("bert.pooler.") || x.name.starts_with("cls.seq_relationship.");
  });
  write_folder(tmp / "heads", t, config);
  r = run_mptrain("convert --from-hf " + (tmp / "heads") + " -o " + (tmp / "mlm_only"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(BertForMaskedLM;"), std::string::npos) << r.output;
  EXPECT_FALSE(load_bert_checkpoint_config(tmp / "mlm_only").nsp);
  // With the NSP head but not the pooler it feeds: a missing tensor.
  t = plain();
  std::erase_if(t, [](const HfTensor& x) { return x.name.starts_with("bert.pooler."); });
  write_folder(tmp / "no_pooler", t, config);
  expect_import_error(tmp / "no_pooler",
                      "missing tensors 'bert.pooler.dense.bias', 'bert.pooler.dense.weight'");
}

TEST_F(HfBertImport, VocabularyFromTheFolderTheFlagOrNone) {
  TempDir tmp;
  write_folder(tmp / "hf", plain());
  testing::write_text(tmp / "hf/tokenizer_config.json",
                      R"({"do_lower_case": false, "model_max_length": 512})");
  auto r = run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "cased"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(100 tokens, cased)"), std::string::npos) << r.output;
  EXPECT_FALSE(bert_checkpoint_lower_case(tmp / "cased"));

  // No vocab.txt: the weights import; fill-mask then asks for one.
  write_folder(tmp / "bare", plain(), testing::hf_bert_config_for(cfg_), false, /*vocab=*/false);
  r = run_mptrain("convert --from-hf " + (tmp / "bare") + " -o " + (tmp / "novocab"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("vocabulary: none"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(tmp / "novocab/vocab.txt"));
  expect_clear_error(run_mptrain("fill-mask --checkpoint " + (tmp / "novocab") + " 'the [MASK] sat'"),
                     "vocab.txt");

  // --vocab supplies one (and a smaller vocabulary than V is allowed, as in transformers).
  std::string small = testing::small_bert_vocab_text();
  small.resize(small.find("w0\n"));
  testing::write_text(tmp / "small_vocab.txt", small);
  r = run_mptrain("convert --from-hf " + (tmp / "bare") + " -o " + (tmp / "flag") + " --vocab " +
                  (tmp / "small_vocab.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_file(tmp / "flag/vocab.txt"), small);
  EXPECT_TRUE(bert_checkpoint_lower_case(tmp / "flag"));
  // fill-mask ranks only the ids that vocabulary spells (the model's other rows have no text).
  r = run_mptrain("fill-mask --checkpoint " + (tmp / "flag") + " -k 10 'the [MASK] sat'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\n  10  "), std::string::npos) << r.output;
}

TEST_F(HfBertImport, BrokenFoldersGiveOneClearError) {
  TempDir tmp;
  const auto good = plain();

  // Corrupt header: not JSON.
  write_folder(tmp / "corrupt", good);
  testing::write_raw_safetensors(tmp / "corrupt/model.safetensors", "{not json", 16);
  expect_import_error(tmp / "corrupt", "model.safetensors': header is not valid JSON");

  // Overlapping offsets: two [2] F32 tensors sharing bytes.
  write_folder(tmp / "overlap", good);
  testing::write_raw_safetensors(tmp / "overlap/model.safetensors",
                                 R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                 16);
  expect_import_error(tmp / "overlap", "overlap");

  // A missing tensor, named with its prefix note.
  auto missing = good;
  missing.erase(std::find_if(missing.begin(), missing.end(),
                             [](const HfTensor& t) { return t.name == "bert.pooler.dense.weight"; }));
  write_folder(tmp / "missing", missing);
  expect_import_error(tmp / "missing", "missing tensor 'bert.pooler.dense.weight'");

  // A wrong shape: a transposed intermediate weight ([C, I] instead of nn.Linear's [I, C]).
  auto wrong = good;
  for (auto& t : wrong)
    if (t.name == "bert.encoder.layer.1.intermediate.dense.weight") t.shape = {32, 48};
  write_folder(tmp / "shape", wrong);
  expect_import_error(tmp / "shape", "has shape [32, 48], expected [48, 32]");

  // A decoder weight that is not the word embeddings: an untied head.
  auto untied = tensors({"", true, false, true, 0, false, DType::F32});
  untied.back().values[7] += 1.0f;
  write_folder(tmp / "untied", untied);
  expect_import_error(
      tmp / "untied",
      "'cls.predictions.decoder.weight' differs from 'bert.embeddings.word_embeddings.weight'");

  // A decoder bias that differs from cls.predictions.bias.
  auto bias = tensors({"", true, false, false, 1, false, DType::F32});
  for (auto& t : bias)
    if (t.name == "cls.predictions.decoder.bias") t.values[3] += 0.5f;
  write_folder(tmp / "bias", bias);
  expect_import_error(tmp / "bias", "'cls.predictions.decoder.bias' differs from 'cls.predictions.bias'");

  // A tensor BertForPreTraining does not have, and one tensor under both spellings.
  auto unknown = good;
  unknown.push_back({"bert.encoder.layer.0.attention.self.distance_embedding.weight", {4}, {1, 2, 3, 4}});
  write_folder(tmp / "unknown", unknown);
  expect_import_error(tmp / "unknown", "unexpected tensor");
  auto twice = good;
  twice.push_back(twice[3]);
  twice.back().name = twice.back().name.substr(5);  // also without "bert."
  write_folder(tmp / "twice", twice);
  expect_import_error(tmp / "twice", "are the same parameter");
}

TEST_F(HfBertImport, UnsupportedConfigAndVocabularyGiveOneClearError) {
  TempDir tmp;
  const auto good = plain();
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* needle;
  };
  const Case cases[] = {
      {"hidden_act", "gelu_new", "hidden_act 'gelu_new' is not supported"},
      {"architectures", nlohmann::json::array({"RobertaForMaskedLM"}), "name no BERT class"},
      {"position_embedding_type", "relative_key", "position_embedding_type 'relative_key' is not supported"},
      {"is_decoder", true, "is_decoder is not supported"},
      {"tie_word_embeddings", false, "tie_word_embeddings false is not supported"},
      {"num_attention_heads", 5, "not divisible by the number of heads"},
      {"hidden_size", nullptr, "field 'hidden_size' must be a positive integer"},
      {"layer_norm_eps", 1e300, "layer_norm_eps must be positive and finite"},
      {"pad_token_id", 100, "pad_token_id 100 is not a token id below vocab_size 100"},
      {"model_type", "roberta", "model_type 'roberta' cannot be imported"},
  };
  int i = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key);
    nlohmann::json config = testing::hf_bert_config_for(cfg_);
    config[c.key] = c.value;
    const std::string dir = tmp / ("cfg" + std::to_string(i++));
    write_folder(dir, good, config);
    expect_import_error(dir, c.needle);
  }

  // vocab.txt with more tokens than vocab_size, or without a special token; a missing --vocab.
  write_folder(tmp / "big", good);
  testing::write_text(tmp / "big/vocab.txt", testing::small_bert_vocab_text() + "extra\n");
  expect_import_error(tmp / "big", "has 101 tokens, more than the model's vocab_size 100");
  write_folder(tmp / "nomask", good);
  std::string text = testing::small_bert_vocab_text();
  text.replace(text.find("[MASK]"), 6, "[MAKS]");
  testing::write_text(tmp / "nomask/vocab.txt", text);
  expect_import_error(tmp / "nomask", "lacks the special token(s) [MASK]");
  write_folder(tmp / "flag", good);
  expect_import_error(tmp / "flag", "not found", " --vocab " + (tmp / "no_such_vocab.txt"));
  testing::write_text(tmp / "flag/tokenizer_config.json", R"({"do_lower_case": "yes"})");
  expect_import_error(tmp / "flag", "do_lower_case");
}

}  // namespace
}  // namespace mptrain
