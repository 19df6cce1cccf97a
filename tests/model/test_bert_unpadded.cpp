// Unpadded (packed) BERT batches and MLM-only models: a packed batch gives the padded batch's
// losses and gradients (fp32, within 1e-6), whatever the tail of [PAD] rows the packing adds;
// an MLM-only model has no pooler or NSP head and refuses NSP labels; bad packings are refused
// with clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "common/host_backend.h"
#include "core/error.h"
#include "data/bert_loader.h"
#include "eval/bert_eval.h"
#include "model/bert.h"
#include "model/recompute.h"
#include "precision/policy.h"

namespace mptrain {
namespace {

BertConfig small_config() {
  BertConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.hidden = 32;
  c.intermediate = 64;
  c.vocab_size = 50;
  c.padded_vocab_size = 64;
  c.max_position = 40;
  return c;
}

// A padded batch of rows with these lengths: [CLS] A [SEP] B [SEP], ids from a formula, about a
// sixth of the content masked, [PAD] (0) after each row's length.
BertBatch padded_batch(const std::vector<int>& lengths, int T) {
  BertBatch b;
  b.B = static_cast<int>(lengths.size());
  b.T = T;
  const size_t BT = static_cast<size_t>(b.B) * T;
  b.input_ids.assign(BT, 0);
  b.token_type_ids.assign(BT, 0);
  b.attention_mask.assign(BT, 0);
  b.mlm_labels.assign(BT, kMlmIgnoreLabel);
  b.lengths = lengths;
  for (int r = 0; r < b.B; ++r) {
    const int len = lengths[static_cast<size_t>(r)], a_end = len / 2;
    for (int t = 0; t < len; ++t) {
      const size_t i = static_cast<size_t>(r) * T + t;
      const bool special = t == 0 || t == a_end || t == len - 1;
      b.input_ids[i] = t == 0 ? 2 : special ? 3 : 5 + (r * 13 + t * 7) % 44;
      b.token_type_ids[i] = t > a_end ? 1 : 0;
      b.attention_mask[i] = 1;
      if (!special && (r + t) % 6 == 1) {
        b.mlm_labels[i] = b.input_ids[i];
        b.input_ids[i] = 4;  // [MASK]
        ++b.num_masked;
      }
    }
    b.nsp_labels.push_back(r % 2);
  }
  return b;
}

struct Pass {
  BertStats stats;
  std::vector<float> grads;
};

Pass run(Bert& model, const BertBatch& batch) {
  model.zero_grad();
  Pass p;
  p.stats = model.forward_backward(bert_inputs(batch, model.config()), batch.B, batch.T, 1.0f);
  p.grads.assign(model.grads().data(), model.grads().data() + model.num_params());
  return p;
}

// The largest difference of any tensor's gradient, relative to that tensor's largest entry, or
// to a thousandth of the largest entry of all where a tensor's own is smaller: the key biases'
// gradients are exactly 0 in exact arithmetic (a softmax does not see a shift common to all
// keys), so theirs are rounding noise with nothing to be relative to.
double worst_gradient_difference(const ParamTable& table, const std::vector<float>& a,
                                 const std::vector<float>& b, std::string* where) {
  double global = 0.0;
  for (float g : a) global = std::max(global, static_cast<double>(std::fabs(g)));
  double worst = 0.0;
  for (const auto& spec : table.specs()) {
    double scale = 1e-3 * global, diff = 0.0;
    for (size_t i = spec.offset; i < spec.offset + spec.numel; ++i) {
      scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
      diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    }
    if (diff / scale > worst) worst = diff / scale, *where = spec.name;
  }
  return worst;
}

void expect_packed_equals_padded(const BertConfig& config, const std::vector<int>& lengths, int T) {
  cpu::Context ctx;
  Bert model(config, cpu_backend(ctx));
  model.init_weights(11);
  model.plan(static_cast<int>(lengths.size()), T);
  const BertBatch padded = padded_batch(lengths, T);
  BertBatch packed = padded;
  unpad(packed);
  int real = 0;
  for (int len : lengths) real += len;
  ASSERT_EQ(packed.cu_seqlens.back(), real);
  ASSERT_EQ(packed.input_ids.size(), static_cast<size_t>(real));

  const Pass a = run(model, padded), b = run(model, packed);
  ASSERT_GT(a.stats.mlm_count, 0);
  EXPECT_EQ(a.stats.mlm_count, b.stats.mlm_count);
  EXPECT_EQ(a.stats.mlm_correct, b.stats.mlm_correct);
  EXPECT_EQ(a.stats.nsp_correct, b.stats.nsp_correct);
  EXPECT_NEAR(a.stats.mlm_loss, b.stats.mlm_loss, 1e-6 * a.stats.mlm_loss);
  EXPECT_NEAR(a.stats.nsp_loss, b.stats.nsp_loss, 1e-6 * a.stats.nsp_loss);
  std::string where;
  const double worst = worst_gradient_difference(model.table(), a.grads, b.grads, &where);
  EXPECT_LT(worst, 1e-6) << where;
  std::printf("packed against padded: worst gradient difference %.2e (%s)\n", worst, where.c_str());
}

TEST(BertUnpadded, PackedEqualsPaddedWithOneTailSequence) {
  // 102 real tokens run as 128 rows: one [PAD] sequence of 26 rows after the batch's five.
  expect_packed_equals_padded(small_config(), {37, 9, 20, 5, 31}, 37);
}

TEST(BertUnpadded, PackedEqualsPaddedWithATailLongerThanT) {
  // 13 real tokens, 24 rows (B·T caps the rounding): the 11-row tail is cut into sequences of at
  // most T = 8.
  expect_packed_equals_padded(small_config(), {8, 3, 2}, 8);
}

TEST(BertUnpadded, MlmOnlyPackedEqualsPadded) {
  BertConfig c = small_config();
  c.nsp = false;
  expect_packed_equals_padded(c, {12, 30, 7, 25}, 30);
}

TEST(BertUnpadded, FullRowsNeedNoTail) {
  // Every row full: packed is the padded layout itself, to the bit.
  cpu::Context ctx;
  Bert model(small_config(), cpu_backend(ctx));
  model.init_weights(4);
  model.plan(2, 16);
  const BertBatch padded = padded_batch({16, 16}, 16);
  BertBatch packed = padded;
  unpad(packed);
  const Pass a = run(model, padded), b = run(model, packed);
  EXPECT_EQ(a.stats.mlm_loss, b.stats.mlm_loss);
  EXPECT_EQ(a.grads, b.grads);
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(BertUnpadded, BadPackingsAreRefused) {
  cpu::Context ctx;
  Bert model(small_config(), cpu_backend(ctx));
  model.init_weights(1);
  model.plan(3, 10);
  BertBatch b = padded_batch({10, 6, 4}, 10);
  unpad(b);
  BertInputs in = bert_inputs(b, model.config());
  std::vector<int> cu = b.cu_seqlens;
  in.cu_seqlens = cu.data();
  cu[0] = 1;
  EXPECT_NE(message_of([&] { model.forward(in, 3, 10); }).find("cu_seqlens starts at 1"), std::string::npos);
  cu = {0, 10, 10, 20};  // an empty sequence
  EXPECT_NE(message_of([&] { model.forward(in, 3, 10); }).find("sequence 1 has 0 tokens"), std::string::npos);
  cu = {0, 4, 16, 20};  // longer than T
  EXPECT_NE(message_of([&] { model.forward(in, 3, 10); }).find("sequence 1 has 12 tokens, not in [1, 10]"),
            std::string::npos);
  // A bad id is named by its sequence and position inside the packed rows.
  cu = b.cu_seqlens;
  std::vector<int> ids = b.input_ids;
  ids[12] = 50;
  in.tokens = ids.data();
  EXPECT_NE(message_of([&] { model.forward(in, 3, 10); }).find("token id 50 at sequence 1, position 2"),
            std::string::npos);
  EXPECT_NE(message_of([&] { unpad(b); }).find("unpadded already"), std::string::npos);
}

TEST(BertMlmOnly, HasNoPoolerOrNspHeadAndRefusesNspLabels) {
  BertConfig c = small_config();
  c.nsp = false;
  const ParamTable t = bert_param_table(c);
  for (const auto& spec : t.specs()) {
    EXPECT_EQ(spec.name.find("pooler"), std::string::npos) << spec.name;
    EXPECT_EQ(spec.name.find("seq_relationship"), std::string::npos) << spec.name;
  }
  BertConfig with = small_config();
  const size_t C = static_cast<size_t>(c.hidden);
  EXPECT_EQ(bert_param_table(with).total() - t.total(), C * C + C + 2 * C + 2);

  cpu::Context ctx;
  Bert model(c, cpu_backend(ctx));
  model.init_weights(2);
  model.plan(2, 12);
  const BertBatch batch = padded_batch({12, 9}, 12);
  BertInputs in = bert_inputs(batch, model.config());
  EXPECT_EQ(in.nsp_labels, nullptr);
  const BertStats st = model.forward_backward(in, 2, 12, 1.0f);
  EXPECT_EQ(st.nsp_count, 0);
  EXPECT_GT(st.mlm_loss, 0.0f);
  EXPECT_EQ(st.loss(), st.mlm_loss);
  in.nsp_labels = batch.nsp_labels.data();
  EXPECT_NE(message_of([&] { model.forward(in, 2, 12); }).find("no NSP head"), std::string::npos);
}

// --recompute gelu, attention and mlp (model/recompute.h): BERT's loss and gradients have the bits of keeping
// every activation, padded and packed, under the CPU's plan in fp32, bf16 and fp16 and under the
// GPU's in bf16, over two backwards (the second reads what the first one's refill left in the
// shared buffers); an MLP width that is no multiple of the vector length puts the exact GELU's
// scalar tail in play. The sets BERT does not refill are refused.
TEST(BertRecompute, GradientsHaveTheBitsOfKeepingEverythingPaddedAndPacked) {
  BertConfig config = small_config();
  config.intermediate = 72;
  const std::vector<int> lengths = {12, 7, 10};
  const int T = 12;
  struct Plan {
    Precision precision;
    bool gpu_plan;
  };
  for (const Plan pl : {Plan{Precision::Fp32, false}, Plan{Precision::Bf16, false},
                        Plan{Precision::Fp16, false}, Plan{Precision::Bf16, true}})
    for (const bool packed : {false, true}) {
      BertBatch batch = padded_batch(lengths, T);
      if (packed) unpad(batch);
      const auto grads_of = [&](RecomputeSet set) {
        cpu::Context ctx;
        BertConfig c = config;
        c.recompute = set;
        const Policy policy =
            make_policy(pl.precision, {}, pl.gpu_plan ? kCudaCaps : cpu::CpuBackend(ctx).caps());
        Bert model(c, cpu_backend(ctx), policy);
        model.init_weights(11);
        model.plan(static_cast<int>(lengths.size()), T);
        model.zero_grad();
        std::vector<float> losses;
        for (int pass = 0; pass < 2; ++pass) {
          const BertStats st =
              model.forward_backward(bert_inputs(batch, model.config()), batch.B, batch.T, 1.0f);
          losses.push_back(st.mlm_loss);
          losses.push_back(st.nsp_loss);
        }
        std::vector<float> g(model.grads().data(), model.grads().data() + model.num_params());
        g.insert(g.end(), losses.begin(), losses.end());
        return g;
      };
      const std::vector<float> keep = grads_of({});
      for (const char* set : {"gelu", "attention", "mlp", "gelu,attention"}) {
        const std::vector<float> got = grads_of(parse_recompute(set));
        ASSERT_EQ(got.size(), keep.size());
        EXPECT_EQ(std::memcmp(got.data(), keep.data(), keep.size() * sizeof(float)), 0)
            << precision_name(pl.precision) << (pl.gpu_plan ? " (GPU plan)" : "")
            << (packed ? ", packed" : ", padded") << ", --recompute " << set
            << ": the gradients or losses differ";
      }
    }
  for (const char* set : {"norm", "block", "gelu,norm"})
    EXPECT_NE(message_of([&] {
                check_recompute(parse_recompute(set), RecomputeFamily::Bert);
              }).find("BERT recomputes gelu, attention and mlp"),
              std::string::npos)
        << set;
  // Less memory: gelu shares the GELU outputs, mlp the fc outputs too.
  const cpu::CpuBackend be(host_context());
  const Policy policy = make_policy(Precision::Fp32, {}, be.caps());
  const auto bytes = [&](const char* set) {
    BertConfig c = config;
    c.recompute = parse_recompute(set);
    return bert_activation_plan(c, policy, be, 3, T, 0).total_bytes();
  };
  EXPECT_LT(bytes("gelu"), bytes("none"));
  EXPECT_LT(bytes("mlp"), bytes("gelu"));
  EXPECT_LT(bytes("attention"), bytes("none"));
}

}  // namespace
}  // namespace mptrain
