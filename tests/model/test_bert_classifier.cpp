// BertForSequenceClassification (BertConfig::num_labels): its parameter table under Hugging Face's
// names; its head is the NSP head with num_labels classes, so a 2-class classifier carrying a
// pretraining model's weights (classifier = cls.seq_relationship) gives the same logits, loss and
// gradients bit for bit (the NSP head is checked against PyTorch in test_bert_reference.cpp);
// in every precision it runs and learns a small task; bad labels and configs are one clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/host_backend.h"
#include "common/test_util.h"
#include "core/error.h"
#include "model/bert.h"
#include "precision/policy.h"

namespace mptrain {
namespace {

BertConfig tiny(int num_labels) {
  BertConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.hidden = 32;
  c.intermediate = 64;
  c.vocab_size = 50;
  c.padded_vocab_size = 64;
  c.max_position = 16;
  c.num_labels = num_labels;
  c.nsp = num_labels == 0;
  return c;
}

// B padded sequences of T: [CLS] tokens [SEP] then padding; the label is what the first real
// token says (id % classes), so the task is learnable from the [CLS] row after attention.
struct Batch {
  int B = 6, T = 10;
  std::vector<int> ids, types, mask, labels;
  BertInputs inputs() { return {ids.data(), types.data(), mask.data(), nullptr, labels.data()}; }
};
Batch make_batch(int classes, int seed) {
  Batch b;
  for (int s = 0; s < b.B; ++s) {
    const int len = b.T - s % 3;
    const int first = 5 + (seed * 7 + s * 11) % 40;
    for (int t = 0; t < b.T; ++t) {
      int id = t == 0 ? 2 : t == len - 1 ? 3 : t == 1 ? first : 5 + (s * 13 + t * 5 + seed) % 40;
      if (t >= len) id = 0;
      b.ids.push_back(id);
      b.types.push_back(0);
      b.mask.push_back(t < len ? 1 : 0);
    }
    b.labels.push_back(first % classes);
  }
  return b;
}

TEST(BertClassifier, TableHasThePoolerAndClassifierAndNoPretrainingHeads) {
  const ParamTable t = bert_param_table(tiny(5));
  EXPECT_TRUE(t.has("bert.pooler.dense.weight"));
  EXPECT_TRUE(t.has("classifier.weight"));
  EXPECT_TRUE(t.has("classifier.bias"));
  EXPECT_EQ(t.get("classifier.weight").shape, (std::vector<int64_t>{5, 32}));
  for (const ParamSpec& s : t.specs()) EXPECT_FALSE(s.name.starts_with("cls.")) << s.name;
  EXPECT_STREQ(bert_seq_head_name(tiny(5)), "classifier");
  EXPECT_STREQ(bert_seq_head_name(tiny(0)), "cls.seq_relationship");
}

TEST(BertClassifier, TwoClassesEqualTheNspHeadBitForBit) {
  const BertConfig pre = tiny(0), cls = tiny(2);
  Bert a(pre, cpu_backend()), b(cls, cpu_backend());
  a.init_weights(11);
  b.init_weights(99);
  // b takes a's weights, the classifier from cls.seq_relationship.
  const float* src = a.params().data();
  float* dst = b.params().data();
  for (const ParamSpec& s : b.table().specs()) {
    std::string name = s.name;
    if (name.starts_with("classifier.")) name = "cls.seq_relationship." + name.substr(11);
    const ParamSpec& from = a.table().get(name);
    ASSERT_EQ(from.numel, s.numel) << name;
    std::copy(src + from.offset, src + from.offset + s.numel, dst + s.offset);
  }
  Batch k = make_batch(2, 1);
  a.plan(k.B, k.T);
  b.plan(k.B, k.T);
  a.zero_grad();
  b.zero_grad();
  const BertStats sa = a.forward_backward(k.inputs(), k.B, k.T, 1.0f);
  const BertStats sb = b.forward_backward(k.inputs(), k.B, k.T, 1.0f);
  EXPECT_EQ(sa.nsp_loss, sb.nsp_loss);
  EXPECT_EQ(sa.nsp_correct, sb.nsp_correct);
  EXPECT_EQ(sb.mlm_count, 0);
  const float *la = a.nsp_logits(), *lb = b.nsp_logits();
  for (int i = 0; i < k.B * 2; ++i) EXPECT_EQ(la[i], lb[i]) << i;
  // Every gradient of the classifier equals the pretraining model's (its MLM head took none).
  for (const ParamSpec& s : b.table().specs()) {
    std::string name = s.name;
    if (name.starts_with("classifier.")) name = "cls.seq_relationship." + name.substr(11);
    const ParamSpec& from = a.table().get(name);
    for (size_t i = 0; i < s.numel; ++i)
      ASSERT_EQ(a.grads().data()[from.offset + i], b.grads().data()[s.offset + i]) << s.name << "[" << i << "]";
  }
}

// A few AdamW steps on one batch: the loss falls and the batch is learnt, in every precision and
// under the GPU's plan run on the CPU.
TEST(BertClassifier, LearnsASmallTaskInEveryPrecision) {
  const BertConfig cfg = tiny(5);
  Batch k = make_batch(5, 2);
  for (const Policy& policy :
       {make_policy(Precision::Fp32), make_policy(Precision::Bf16), make_policy(Precision::Fp16),
        make_policy(Precision::Bf16, {}, kCudaCaps)}) {
    const std::string what = std::string(precision_name(policy.precision)) +
                             (policy.residual_stream != StorageType::F32 ? " (GPU plan)" : "");
    Bert m(cfg, cpu_backend(), policy);
    m.init_weights(5);
    m.plan(k.B, k.T);
    FloatBuffer mo(m.num_params(), m.backend().memory()), v(m.num_params(), m.backend().memory());
    mo.zero();
    v.zero();
    const float first = m.forward(k.inputs(), k.B, k.T).nsp_loss;
    BertStats last;
    for (int step = 1; step <= 40; ++step) {
      m.zero_grad();
      last = m.forward_backward(k.inputs(), k.B, k.T, 1.0f);
      ASSERT_TRUE(std::isfinite(last.nsp_loss)) << what << " step " << step;
      const View p = View::f32(m.params().data(), {static_cast<int64_t>(m.num_params())});
      const View g = View::f32(m.grads().data(), {static_cast<int64_t>(m.num_params())});
      m.backend().adamw({.params = p,
                         .grads = g,
                         .m = View::f32(mo.data(), {static_cast<int64_t>(m.num_params())}),
                         .v = View::f32(v.data(), {static_cast<int64_t>(m.num_params())}),
                         .lr = 3e-3f,
                         .beta2 = 0.99f,
                         .t = step});
    }
    std::printf("[bert classifier %s] loss %.4f -> %.4f, %d of %d right\n", what.c_str(), first, last.nsp_loss,
                last.nsp_correct, k.B);
    EXPECT_LT(last.nsp_loss, 0.3f * first) << what << ": " << first << " -> " << last.nsp_loss;
    EXPECT_EQ(last.nsp_count, k.B) << what;
    EXPECT_GE(last.nsp_correct, k.B - 1) << what;
  }
}

TEST(BertClassifier, BadLabelsAndConfigsAreOneClearError) {
  Bert m(tiny(3), cpu_backend());
  m.init_weights(1);
  Batch k = make_batch(3, 0);
  m.plan(k.B, k.T);
  k.labels[4] = 3;
  testing::expect_error([&] { m.forward(k.inputs(), k.B, k.T); },
                                 "class label 3 of sequence 4 is outside [0, 3)");
  k.labels[4] = -1;
  testing::expect_error([&] { m.forward(k.inputs(), k.B, k.T); }, "class label -1");
  k.labels[4] = 0;
  std::vector<int> mlm(k.ids.size(), -1);
  BertInputs in = k.inputs();
  in.mlm_labels = mlm.data();
  testing::expect_error([&] { m.forward(in, k.B, k.T); }, "a classifier has no MLM head");
  BertConfig both = tiny(3);
  both.nsp = true;
  testing::expect_error([&] { validate(both); }, "has no next-sentence head");
  BertConfig negative = tiny(0);
  negative.num_labels = -2;
  negative.nsp = false;
  testing::expect_error([&] { validate(negative); }, "num_labels is negative");
}

}  // namespace
}  // namespace mptrain
