// BERT model facts that need no PyTorch: parameter counts of the presets (bert-base must be
// Hugging Face's 110,106,428), the table's names and decay flags, what padding may and may not
// change, and clear errors for inputs the model cannot take.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "core/error.h"
#include "model/bert.h"
#include "common/host_backend.h"

namespace mptrain {
namespace {

size_t hf_count(const ParamTable& t) {
  size_t n = 0;
  for (const auto& s : t.specs()) n += s.hf_numel();
  return n;
}

TEST(BertConfig, PresetParameterCounts) {
  // BertForPreTraining with bert-base-uncased's vocabulary: 110,106,428 (decoder tied).
  EXPECT_EQ(hf_count(bert_param_table(bert_preset("bert-base"))), 110106428u);
  // bert-large: 24 layers, 1024 wide, 16 heads; 335,141,888 in BertModel plus the heads.
  EXPECT_EQ(hf_count(bert_param_table(bert_preset("bert-large"))), 336226108u);
  const BertConfig base = bert_preset("bert-base");
  EXPECT_EQ(base.padded_vocab_size, 30528);  // 30522 rounded up to a multiple of 64
  EXPECT_EQ(base.padded_vocab_size % 64, 0);
  // In memory the word embeddings and the decoder bias carry the padded rows.
  EXPECT_EQ(bert_param_table(base).total(), 110106428u + 6u * 768u + 6u);
  const BertConfig mini = bert_preset("bert-mini", 8000);
  EXPECT_EQ(mini.n_layer, 4);
  EXPECT_EQ(mini.hidden, 256);
  EXPECT_EQ(mini.n_head, 4);
  EXPECT_EQ(mini.intermediate, 1024);
  EXPECT_EQ(mini.padded_vocab_size, 8000);
  const BertConfig tiny = bert_preset("bert-tiny", 1000);
  EXPECT_EQ(tiny.n_layer, 2);
  EXPECT_EQ(tiny.hidden, 128);
  EXPECT_EQ(tiny.padded_vocab_size, 1024);
}

TEST(BertConfig, UnknownPresetListsTheKnownOnes) {
  try {
    bert_preset("bert-huge");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bert-base"), std::string::npos) << e.what();
  }
}

TEST(BertTable, HuggingFaceNamesShapesAndDecay) {
  const ParamTable t = bert_param_table(bert_preset("bert-tiny", 1000));
  const auto& q = t.get("bert.encoder.layer.1.attention.self.query.weight");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{128, 128}));
  EXPECT_TRUE(q.decay);
  const auto& fc = t.get("bert.encoder.layer.0.intermediate.dense.weight");
  EXPECT_EQ(fc.shape, (std::vector<int64_t>{512, 128}));  // nn.Linear [out, in]
  EXPECT_FALSE(t.get("bert.encoder.layer.0.output.LayerNorm.weight").decay);
  EXPECT_FALSE(t.get("cls.predictions.bias").decay);
  EXPECT_TRUE(t.get("bert.embeddings.word_embeddings.weight").decay);
  EXPECT_EQ(t.get("bert.embeddings.word_embeddings.weight").hf_shape, (std::vector<int64_t>{1000, 128}));
  EXPECT_EQ(t.get("cls.predictions.bias").shape, (std::vector<int64_t>{1024}));
  EXPECT_EQ(t.get("cls.seq_relationship.weight").shape, (std::vector<int64_t>{2, 128}));
  EXPECT_THROW(t.get("cls.predictions.decoder.weight"), Error);  // tied: no entry of its own
}

struct Tiny {
  BertConfig cfg;
  int B = 2, T = 12;
  std::vector<int> ids, types, mask, mlm, nsp{1, 0};
  Tiny() {
    cfg.n_layer = 2;
    cfg.n_head = 2;
    cfg.hidden = 32;
    cfg.intermediate = 64;
    cfg.vocab_size = 50;
    cfg.padded_vocab_size = 64;
    cfg.max_position = 16;
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        const bool pad = b == 1 && t >= 8;
        ids.push_back(pad ? 0 : 5 + (b * 11 + t * 7) % 40);
        types.push_back(t >= 5 && !pad ? 1 : 0);
        mask.push_back(pad ? 0 : 1);
        mlm.push_back(!pad && t % 4 == 2 ? 7 + t : -1);
      }
  }
  BertInputs batch() const { return {ids.data(), types.data(), mask.data(), mlm.data(), nsp.data()}; }
};

TEST(Bert, PaddedPositionsChangeNothing) {
  Tiny k;
  cpu::Context ctx;
  Bert model(k.cfg, cpu_backend(ctx));
  model.init_weights(3);
  model.plan(k.B, k.T);
  const BertStats a = model.forward(k.batch(), k.B, k.T);
  EXPECT_EQ(a.mlm_count, 5);
  EXPECT_EQ(a.nsp_count, 2);
  EXPECT_GT(a.mlm_loss, 0.0f);
  // Other ids and segments under the padding: same losses, to the bit.
  Tiny other = k;
  for (int t = 8; t < k.T; ++t) other.ids[k.T + t] = 17 + t, other.types[k.T + t] = 1;
  const BertStats b = model.forward(other.batch(), k.B, k.T);
  EXPECT_EQ(a.mlm_loss, b.mlm_loss);
  EXPECT_EQ(a.nsp_loss, b.nsp_loss);
  // Without the mask the padding is attended to, and the losses move.
  BertInputs unmasked = other.batch();
  unmasked.attention_mask = nullptr;
  const BertStats c = model.forward(unmasked, k.B, k.T);
  EXPECT_NE(a.mlm_loss, c.mlm_loss);
}

TEST(Bert, AccumulatesGradientsAndScalesThem) {
  Tiny k;
  cpu::Context ctx;
  Bert model(k.cfg, cpu_backend(ctx));
  model.init_weights(5);
  model.plan(k.B, k.T);
  model.zero_grad();
  model.forward_backward(k.batch(), k.B, k.T, 1.0f);
  std::vector<float> once(model.grads().data(), model.grads().data() + model.num_params());
  model.forward_backward(k.batch(), k.B, k.T, 0.5f);
  double max_rel = 0.0;
  for (size_t i = 0; i < once.size(); ++i)
    if (std::fabs(once[i]) > 1e-6f) max_rel = std::max(max_rel, std::fabs(model.grads()[i] / (1.5 * once[i]) - 1.0));
  EXPECT_LT(max_rel, 1e-4);
  // The [PAD] word row takes no gradient from the input side: only the tied decoder's.
  // Padded vocabulary rows take none at all.
  const size_t word = model.table().get("bert.embeddings.word_embeddings.weight").offset;
  for (size_t i = static_cast<size_t>(k.cfg.vocab_size) * k.cfg.hidden; i < static_cast<size_t>(k.cfg.padded_vocab_size) * k.cfg.hidden; ++i)
    ASSERT_EQ(model.grads()[word + i], 0.0f);
}

TEST(Bert, BadInputGivesClearErrors) {
  Tiny k;
  cpu::Context ctx;
  Bert model(k.cfg, cpu_backend(ctx));
  model.init_weights(1);
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { model.plan(1, 17); }).find("longer than the BERT model's 16 positions"), std::string::npos);
  model.plan(k.B, k.T);
  Tiny bad = k;
  bad.ids[3] = 50;
  EXPECT_NE(message([&] { model.forward(bad.batch(), k.B, k.T); }).find("token id 50 at sequence 0, position 3"),
            std::string::npos);
  bad = k;
  bad.types[4] = 2;
  EXPECT_NE(message([&] { model.forward(bad.batch(), k.B, k.T); }).find("token type 2"), std::string::npos);
  bad = k;
  bad.mlm[5] = 99;
  EXPECT_NE(message([&] { model.forward(bad.batch(), k.B, k.T); }).find("masked-LM label 99"), std::string::npos);
  bad = k;
  bad.nsp[1] = 2;
  EXPECT_NE(message([&] { model.forward(bad.batch(), k.B, k.T); }).find("next-sentence label 2"), std::string::npos);
  bad = k;
  for (int t = 0; t < k.T; ++t) bad.mask[t] = 0;
  EXPECT_NE(message([&] { model.forward(bad.batch(), k.B, k.T); }).find("all padding"), std::string::npos);
  EXPECT_NE(message([&] { model.forward(k.batch(), k.B + 1, k.T); }).find("exceeds the planned"), std::string::npos);
}

}  // namespace
}  // namespace mptrain
