// `mptrain convert --from-hf` on hand-built Hugging Face folders:
//  - every naming variant loads: hub names (no prefix), save_pretrained's "transformer." prefix,
//    old causal-mask buffers (h.N.attn.bias, h.N.attn.masked_bias), a tied lm_head.weight,
//    F16 and BF16 tensors (converted exactly to fp32), n_ctx instead of n_positions
//  - every broken folder gives one clear error line, a non-zero exit, and no output folder:
//    corrupt header, overlapping offsets, missing tensor, wrong shape, bad config.json, an
//    untied lm_head, unknown tensors, unsupported dtypes or settings
#include <gtest/gtest.h>

#include <filesystem>

#include "convert/convert_test_util.h"
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
  std::string prefix;  // "" or "transformer."
  bool mask_buffers;   // h.N.attn.bias [1,1,T,T] and h.N.attn.masked_bias []
  bool lm_head;        // lm_head.weight, equal to wte
  DType dtype;
};

class HfImport : public ::testing::Test {
 protected:
  HfImport() : model_(cfg_, cpu_backend(ctx_)) { testing::init_nontrivial(model_, 21); }

  // The model's tensors as a variant names and stores them.
  std::vector<HfTensor> tensors(const Variant& v) const {
    std::vector<HfTensor> out;
    for (auto t : testing::hub_tensors(model_)) {
      t.name = v.prefix + t.name;
      t.dtype = v.dtype;
      out.push_back(t);
    }
    if (v.lm_head) {
      HfTensor head = out.front();  // wte, stored alike
      head.name = "lm_head.weight";
      out.push_back(head);
    }
    if (v.mask_buffers) {
      const int T = cfg_.block_size;
      for (int l = 0; l < cfg_.n_layer; ++l) {
        HfTensor mask{
            v.prefix + "h." + std::to_string(l) + ".attn.bias", {1, 1, T, T}, std::vector<float>(T * T)};
        for (int i = 0; i < T; ++i)
          for (int j = 0; j <= i; ++j) mask.values[i * T + j] = 1.0f;
        out.push_back(mask);
        out.push_back({v.prefix + "h." + std::to_string(l) + ".attn.masked_bias", {}, {-1e4f}});
      }
    }
    return out;
  }

  std::string write_folder(const std::string& dir, const std::vector<HfTensor>& t,
                           const nlohmann::json& config) const {
    fs::create_directories(dir);
    testing::write_text(dir + "/config.json", config.dump(2));
    testing::write_safetensors(dir + "/model.safetensors", t);
    return dir;
  }
  std::string write_folder(const std::string& dir, const std::vector<HfTensor>& t) const {
    return write_folder(dir, t, testing::hf_config_for(cfg_));
  }

  // Converts a broken folder: one clear error, and nothing left under the output name.
  void expect_import_error(const std::string& hf_dir, const std::string& needle) const {
    const std::string out = hf_dir + "-out";
    expect_clear_error(run_mptrain("convert --from-hf " + hf_dir + " -o " + out), needle);
    EXPECT_FALSE(fs::exists(out)) << out;
    for (const auto& e : fs::directory_iterator(fs::path(hf_dir).parent_path()))
      EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos)
          << "left behind: " << e.path();
  }

  cpu::Context ctx_;
  Gpt2Config cfg_ = testing::small_gpt2_config();
  Gpt2 model_;
};

TEST_F(HfImport, EveryNamingVariantAndDtypeLoads) {
  const Variant variants[] = {
      {"hub layout", "", false, false, DType::F32},
      {"save_pretrained", "transformer.", false, true, DType::F32},
      {"old file with mask buffers", "", true, false, DType::F32},
      {"prefix, buffers and lm_head", "transformer.", true, true, DType::F32},
      {"fp16", "", true, false, DType::F16},
      {"bf16 with lm_head", "transformer.", false, true, DType::BF16},
  };
  for (const auto& v : variants) {
    SCOPED_TRACE(v.what);
    TempDir tmp;
    const auto t = tensors(v);
    write_folder(tmp / "hf", t);
    auto r = run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "out"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    if (v.mask_buffers) {
      EXPECT_NE(r.output.find("4 mask buffer(s) ignored"), std::string::npos) << r.output;
    }
    if (v.lm_head) {
      EXPECT_NE(r.output.find("lm_head.weight checked equal"), std::string::npos) << r.output;
    }
    EXPECT_NE(r.output.find(std::string(dtype_name(v.dtype))), std::string::npos) << r.output;

    // Every parameter holds exactly the values the file stores, as fp32 under the hub name.
    SafetensorsFile out(tmp / "out/model.safetensors");
    EXPECT_EQ(out.names().size(), model_.table().specs().size());
    for (const auto& spec : model_.table().specs()) {
      const auto it =
          std::find_if(t.begin(), t.end(), [&](const HfTensor& x) { return x.name == v.prefix + spec.name; });
      ASSERT_NE(it, t.end());
      const std::vector<float> want = it->stored();
      std::vector<float> got(spec.hf_numel());
      out.read_f32(spec.name, spec.hf_shape, got.data());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << spec.name;
    }
    const Gpt2Config c = load_checkpoint_config(tmp / "out");
    EXPECT_EQ(c.n_layer, cfg_.n_layer);
    EXPECT_EQ(c.vocab_size, 101);
    EXPECT_EQ(c.padded_vocab_size, 128);
  }
}

TEST_F(HfImport, OldConfigWithNctxOnlyAndPaddingOption) {
  TempDir tmp;
  nlohmann::json config = testing::hf_config_for(cfg_);
  config.erase("n_positions");
  config["activation_function"] = "gelu_pytorch_tanh";  // the same tanh GELU under its newer name
  write_folder(tmp / "hf", tensors({"", "", false, false, DType::F32}), config);
  auto r = run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "out") + " --vocab-multiple 64");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Gpt2Config c = load_checkpoint_config(tmp / "out");
  EXPECT_EQ(c.block_size, 32);
  EXPECT_EQ(c.padded_vocab_size, 128);  // 101 rounded up to a multiple of 64
  auto r1 =
      run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "out1") + " --vocab-multiple 1");
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  EXPECT_EQ(load_checkpoint_config(tmp / "out1").padded_vocab_size, 101);
}

TEST_F(HfImport, BrokenSafetensorsGiveOneClearError) {
  TempDir tmp;
  const nlohmann::json config = testing::hf_config_for(cfg_);
  auto folder = [&](const std::string& name) {
    fs::create_directories(tmp / name);
    testing::write_text(tmp / (name + "/config.json"), config.dump());
    return tmp / name;
  };
  // Corrupt header: not JSON.
  testing::write_raw_safetensors(folder("corrupt") + "/model.safetensors",
                                 "{\"wte.weight\": {\"dtype\": \"F3", 64);
  expect_import_error(tmp / "corrupt", "header is not valid JSON");
  // Header length beyond the end of the file.
  {
    folder("short");
    std::ofstream f(tmp / "short/model.safetensors", std::ios::binary);
    const uint64_t n = 1 << 20;
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << "{}";
  }
  expect_import_error(tmp / "short", "header length");
  // Overlapping offsets.
  testing::write_raw_safetensors(folder("overlap") + "/model.safetensors",
                                 R"({"ln_f.weight":{"dtype":"F32","shape":[64],"data_offsets":[0,256]},)"
                                 R"("ln_f.bias":{"dtype":"F32","shape":[64],"data_offsets":[128,384]}})",
                                 384);
  expect_import_error(tmp / "overlap", "overlaps");
  // No model.safetensors at all.
  folder("empty");
  expect_import_error(tmp / "empty", "model.safetensors' not found");
}

TEST_F(HfImport, WrongTensorsGiveOneClearError) {
  TempDir tmp;
  const Variant hub{"", "", false, false, DType::F32};
  {  // missing tensor
    auto t = tensors(hub);
    t.erase(
        std::remove_if(t.begin(), t.end(), [](const HfTensor& x) { return x.name == "h.1.mlp.c_fc.weight"; }),
        t.end());
    expect_import_error(write_folder(tmp / "missing", t), "missing tensor 'h.1.mlp.c_fc.weight'");
  }
  {  // wrong shape: an nn.Linear [out, in] weight where Conv1D [in, out] belongs
    auto t = tensors(hub);
    for (auto& x : t)
      if (x.name == "h.0.attn.c_attn.weight") x.shape = {192, 64};
    expect_import_error(write_folder(tmp / "shape", t), "has shape [192, 64], expected [64, 192]");
  }
  {  // config and file disagree on the vocabulary
    nlohmann::json config = testing::hf_config_for(cfg_);
    config["vocab_size"] = 100;
    expect_import_error(write_folder(tmp / "vocab", tensors(hub), config),
                        "has shape [101, 64], expected [100, 64]");
  }
  {  // lm_head present but different from wte
    auto t = tensors({"", "transformer.", false, true, DType::F32});
    t.back().values[7] += 1.0f;
    expect_import_error(write_folder(tmp / "untied", t), "'lm_head.weight' differs from 'wte.weight'");
  }
  {  // a tensor GPT2LMHeadModel does not have
    auto t = tensors(hub);
    t.push_back({"h.0.attn.q_proj.weight", {64, 64}, std::vector<float>(64 * 64)});
    expect_import_error(write_folder(tmp / "unknown", t), "unexpected tensor 'h.0.attn.q_proj.weight'");
  }
  {  // the same parameter with and without the prefix
    auto t = tensors(hub);
    t.push_back(t[3]);
    t.back().name = "transformer." + t.back().name;
    expect_import_error(write_folder(tmp / "twice", t), "are the same parameter");
  }
  {  // a dtype that is not a float weight type
    fs::create_directories(tmp / "f64");
    testing::write_text(tmp / "f64/config.json", testing::hf_config_for(cfg_).dump());
    SafetensorsWriter w;
    std::vector<double> zeros(cfg_.vocab_size * 64);
    for (const auto& x : tensors(hub)) {
      if (x.name == "wte.weight")
        w.add_copy(x.name, DType::F64, x.shape, zeros.data());
      else
        w.add_copy(x.name, DType::F32, x.shape, x.values.data());
    }
    w.write(tmp / "f64/model.safetensors");
    expect_import_error(tmp / "f64", "only F32, F16 and BF16");
  }
}

TEST_F(HfImport, BadConfigGivesOneClearError) {
  TempDir tmp;
  const auto t = tensors({"", "", false, false, DType::F32});
  auto with = [&](const std::string& name, const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json config = testing::hf_config_for(cfg_);
    change(config);
    return write_folder(tmp / name, t, config);
  };
  write_folder(tmp / "notjson", t);
  testing::write_text(tmp / "notjson/config.json", "{\"n_layer\": 2,");
  expect_import_error(tmp / "notjson", "config.json' is not valid JSON");
  fs::create_directories(tmp / "noconfig");
  testing::write_safetensors(tmp / "noconfig/model.safetensors", t);
  expect_import_error(tmp / "noconfig", "config.json' not found");
  expect_import_error(with("nolayers", [](auto& c) { c.erase("n_layer"); }), "missing field 'n_layer'");
  expect_import_error(with("strlayers", [](auto& c) { c["n_layer"] = "2"; }),
                      "'n_layer' must be a positive integer");
  expect_import_error(with("nopos",
                           [](auto& c) {
                             c.erase("n_positions");
                             c.erase("n_ctx");
                           }),
                      "missing field 'n_positions' or 'n_ctx'");
  expect_import_error(with("heads", [](auto& c) { c["n_head"] = 3; }), "not divisible by n_head");
  expect_import_error(with("relu", [](auto& c) { c["activation_function"] = "relu"; }),
                      "activation_function 'relu' is not supported");
  expect_import_error(with("inner", [](auto& c) { c["n_inner"] = 100; }), "n_inner 100 is not supported");
  expect_import_error(with("untied", [](auto& c) { c["tie_word_embeddings"] = false; }),
                      "tie_word_embeddings false is not supported");
  expect_import_error(with("t5", [](auto& c) { c["model_type"] = "t5"; }),
                      "model_type 't5' cannot be imported (supported: gpt2, llama, qwen3 (QK-norm), mptrain_llama, bert)");
  // A GPT-2 folder labelled BERT goes to the BERT importer, which says what it misses.
  expect_import_error(with("bert", [](auto& c) { c["model_type"] = "bert"; }), "name no BERT class");
  expect_import_error(with("arch", [](auto& c) { c["architectures"] = {"GPT2ForSequenceClassification"}; }),
                      "name no GPT2LMHeadModel");
}

TEST_F(HfImport, UsageErrors) {
  TempDir tmp;
  write_folder(tmp / "hf", tensors({"", "", false, false, DType::F32}));
  fs::create_directories(tmp / "full");
  testing::write_text(tmp / "full/keep.txt", "x");
  expect_clear_error(run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "full")),
                     "exists and is not empty");
  EXPECT_TRUE(fs::exists(tmp / "full/keep.txt"));
  expect_clear_error(
      run_mptrain("convert --from-hf " + (tmp / "hf") + " --to-hf " + (tmp / "hf") + " -o " + (tmp / "o")),
      "exactly one of --from-hf");
  expect_clear_error(run_mptrain("convert --from-hf " + (tmp / "nothing") + " -o " + (tmp / "o")),
                     "is not a folder");
  // An HF folder is not an mptrain checkpoint: export says how to get one.
  expect_clear_error(run_mptrain("convert --to-hf " + (tmp / "hf") + " -o " + (tmp / "o")),
                     "import Hugging Face");
  // An empty output folder is fine (it is replaced).
  fs::create_directories(tmp / "emptyout");
  auto r = run_mptrain("convert --from-hf " + (tmp / "hf") + " -o " + (tmp / "emptyout") + "/");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(tmp / "emptyout/model.safetensors"));
}

}  // namespace
}  // namespace mptrain
