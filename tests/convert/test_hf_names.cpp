// The model-independent part of Hugging Face import (io/hf_folder.h), with a BERT-like name
// map on a hand-made parameter table: how the next model family plugs in. Covers what GPT-2's
// map does not use: old LayerNorm spellings (gamma/beta), a prefix that the table's own names
// carry ("bert."), and a tied copy under another head's name.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "core/error.h"
#include "io/hf_folder.h"

namespace mptrain {
namespace {

HfNameMap bert_like_map() {
  return {"BertForPreTraining",
          "bert.",
          {{"gamma", "weight"}, {"beta", "bias"}},
          {"embeddings.position_ids"},
          {{"cls.predictions.decoder.weight", "embeddings.word_embeddings.weight"}}};
}

ParamTable bert_like_table() {
  ParamTable t;
  t.add("bert.embeddings.word_embeddings.weight", {8, 4}, InitRule::Normal, true,
        {6, 4});  // 6 real rows of 8
  t.add("bert.embeddings.LayerNorm.weight", {4}, InitRule::Ones, false);
  t.add("bert.embeddings.LayerNorm.bias", {4}, InitRule::Zeros, false);
  t.add("cls.predictions.bias", {6}, InitRule::Zeros, false);
  return t;
}

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

void write(const std::string& path, const std::vector<Tensor>& tensors) {
  SafetensorsWriter w;
  for (const auto& t : tensors) w.add_copy(t.name, DType::F32, t.shape, t.values.data());
  w.write(path);
}

std::vector<float> iota(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

TEST(HfNames, PatternsAndCanonicalNames) {
  EXPECT_TRUE(hf_name_matches("h.0.attn.bias", "h.#.attn.bias"));
  EXPECT_TRUE(hf_name_matches("h.123.attn.masked_bias", "h.#.attn.masked_bias"));
  EXPECT_FALSE(hf_name_matches("h.0.attn.c_attn.bias", "h.#.attn.bias"));
  EXPECT_FALSE(hf_name_matches("h..attn.bias", "h.#.attn.bias"));
  EXPECT_FALSE(hf_name_matches("h.x.attn.bias", "h.#.attn.bias"));
  EXPECT_FALSE(hf_name_matches("h.0.attn.bias.extra", "h.#.attn.bias"));
  const HfNameMap map = bert_like_map();
  EXPECT_EQ(hf_canonical_name("bert.embeddings.LayerNorm.gamma", map), "embeddings.LayerNorm.weight");
  EXPECT_EQ(hf_canonical_name("embeddings.LayerNorm.beta", map), "embeddings.LayerNorm.bias");
  EXPECT_EQ(hf_canonical_name("cls.predictions.bias", map), "cls.predictions.bias");
  EXPECT_EQ(hf_canonical_name("bert.encoder.layer.0.gammaray", map), "encoder.layer.0.gammaray");
}

TEST(HfNames, OldSpellingsPrefixesIgnoredBuffersAndTiedCopiesLoad) {
  testing::TempDir tmp;
  const ParamTable table = bert_like_table();
  const auto emb = iota(24, 1.0f);
  // An old TF-converted file: no "bert." prefix, gamma/beta, a position_ids buffer, a tied decoder.
  write(tmp / "old.safetensors", {{"embeddings.word_embeddings.weight", {6, 4}, emb},
                                  {"embeddings.LayerNorm.gamma", {4}, iota(4, 100.0f)},
                                  {"embeddings.LayerNorm.beta", {4}, iota(4, 200.0f)},
                                  {"cls.predictions.bias", {6}, iota(6, 300.0f)},
                                  {"embeddings.position_ids", {1, 4}, iota(4, 0.0f)},
                                  {"cls.predictions.decoder.weight", {6, 4}, emb}});
  std::vector<float> params(table.total(), -1.0f);
  const HfLoadReport report =
      load_hf_params(SafetensorsFile(tmp / "old.safetensors"), bert_like_map(), table, params.data());
  EXPECT_EQ(report.ignored, std::vector<std::string>{"embeddings.position_ids"});
  EXPECT_EQ(report.tied_copies, std::vector<std::string>{"cls.predictions.decoder.weight"});
  EXPECT_EQ(report.dtypes.at("F32"), 4u);
  const ParamSpec& we = table.get("bert.embeddings.word_embeddings.weight");
  for (size_t i = 0; i < 24; ++i) EXPECT_EQ(params[we.offset + i], emb[i]);
  for (size_t i = 24; i < we.numel; ++i) EXPECT_EQ(params[we.offset + i], 0.0f) << "padded rows are zeroed";
  EXPECT_EQ(params[table.get("bert.embeddings.LayerNorm.weight").offset + 3], 103.0f);
  EXPECT_EQ(params[table.get("bert.embeddings.LayerNorm.bias").offset], 200.0f);
  EXPECT_EQ(params[table.get("cls.predictions.bias").offset + 5], 305.0f);
}

TEST(HfNames, AStandInCopyFillsItsAbsentSource) {
  testing::TempDir tmp;
  const ParamTable table = bert_like_table();
  HfNameMap map = bert_like_map();
  map.tied.push_back({"cls.predictions.decoder.bias", "cls.predictions.bias"});
  const std::vector<Tensor> base = {{"bert.embeddings.word_embeddings.weight", {6, 4}, iota(24, 1.0f)},
                                    {"bert.embeddings.LayerNorm.weight", {4}, iota(4, 0.0f)},
                                    {"bert.embeddings.LayerNorm.bias", {4}, iota(4, 0.0f)},
                                    {"cls.predictions.decoder.bias", {6}, iota(6, 50.0f)}};
  write(tmp / "f.safetensors", base);
  std::vector<float> params(table.total());
  // Not a stand-in: the source is simply missing.
  EXPECT_THROW(load_hf_params(SafetensorsFile(tmp / "f.safetensors"), map, table, params.data()), Error);
  map.stand_ins = {"cls.predictions.decoder.bias"};
  const HfLoadReport report = load_hf_params(SafetensorsFile(tmp / "f.safetensors"), map, table, params.data());
  EXPECT_EQ(report.stand_ins, std::vector<std::string>{"cls.predictions.decoder.bias"});
  EXPECT_TRUE(report.tied_copies.empty());
  EXPECT_EQ(params[table.get("cls.predictions.bias").offset + 5], 55.0f);
  // With both present, the copy is a tied copy again: checked, not read.
  auto both = base;
  both.push_back({"cls.predictions.bias", {6}, iota(6, 50.0f)});
  write(tmp / "g.safetensors", both);
  const HfLoadReport r2 = load_hf_params(SafetensorsFile(tmp / "g.safetensors"), map, table, params.data());
  EXPECT_TRUE(r2.stand_ins.empty());
  EXPECT_EQ(r2.tied_copies, std::vector<std::string>{"cls.predictions.decoder.bias"});
}

TEST(HfNames, ProblemsAreErrorsNamingTheTensor) {
  testing::TempDir tmp;
  const ParamTable table = bert_like_table();
  std::vector<float> params(table.total());
  auto load = [&](const std::vector<Tensor>& tensors) {
    write(tmp / "f.safetensors", tensors);
    load_hf_params(SafetensorsFile(tmp / "f.safetensors"), bert_like_map(), table, params.data());
  };
  auto expect_error = [&](const std::vector<Tensor>& tensors, const std::string& needle) {
    try {
      load(tensors);
      ADD_FAILURE() << "no error; expected " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::vector<Tensor> good = {{"bert.embeddings.word_embeddings.weight", {6, 4}, iota(24, 1.0f)},
                                    {"bert.embeddings.LayerNorm.weight", {4}, iota(4, 0.0f)},
                                    {"bert.embeddings.LayerNorm.bias", {4}, iota(4, 0.0f)},
                                    {"cls.predictions.bias", {6}, iota(6, 0.0f)}};
  load(good);
  auto with = [&](const Tensor& extra) {
    auto t = good;
    t.push_back(extra);
    return t;
  };
  expect_error(with({"bert.embeddings.LayerNorm.gamma", {4}, iota(4, 0.0f)}), "are the same parameter");
  expect_error(with({"cls.predictions.decoder.weight", {6, 4}, iota(24, 2.0f)}),
               "'cls.predictions.decoder.weight' differs from 'bert.embeddings.word_embeddings.weight'");
  expect_error(with({"cls.predictions.decoder.weight", {4, 6}, iota(24, 1.0f)}),
               "has shape [4, 6], expected [6, 4]");
  expect_error(with({"bert.pooler.dense.weight", {4, 4}, iota(16, 0.0f)}),
               "unexpected tensor 'bert.pooler.dense.weight'");
  expect_error({good[0], good[1], good[3]},
               "missing tensor 'bert.embeddings.LayerNorm.bias' of BertForPreTraining");
}

}  // namespace
}  // namespace mptrain
