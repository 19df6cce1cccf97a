// End to end: BERT's forward + losses + backward on the GPU (cuda::BertDevice) against the CPU
// model (model/bert.h, fp32: the ground truth) from the same weights (Bert::init_weights) and the
// same batch: padding (an attention mask), both token types, masked positions (one of them a
// [CLS] row, so the MLM and pooler gradients meet in one row) and NSP labels.
//
// Two configurations: HS 16 (C 64, 4 heads: the naive key-masked attention in every precision)
// and HS 64 (C 128, 2 heads: flash attention for bf16/fp16). Tolerances (relative): loss parts
// fp32 1e-5, TF32 1e-3, bf16/fp16 2e-2 (every activation, the residual stream and the logits in
// 16 bits); per-tensor gradients (relative norm error, the tensor named on failure) fp32 1e-4,
// TF32 2e-2, fp16 5e-2, bf16 1e-1 (as test_gpt2_device_gpu: 8-bit mantissas on gradients summed
// over the batch; a swapped or missing tensor gives an error near 1). fp16 runs at grad_scale
// 1024 (its gradients are stored in fp16) and is unscaled before the comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cuda/bert_device.h"
#include "backend/cuda/bert_device_impl.h"  // the host half of a step, tested without a GPU
#include "backend/cuda/device_buffer.h"
#include "cuda/gpu_test_util.h"
#include "model/bert.h"
#include "model/gpt2_config.h"
#include "precision/precision.h"

namespace mptrain {
namespace {

using gputest::ctx;
using gputest::rel_err;

constexpr int kB = 4, kT = 32, kV = 100;

BertConfig tiny_config(int hidden, int heads) {
  BertConfig c;
  c.vocab_size = kV;
  c.padded_vocab_size = pad_vocab(kV, 64);  // 128: 28 padded logit columns and word rows
  c.max_position = 64;
  c.type_vocab_size = 2;
  c.n_layer = 2;
  c.n_head = heads;
  c.hidden = hidden;
  c.intermediate = 4 * hidden;
  return c;
}
BertConfig hs16() { return tiny_config(64, 4); }
BertConfig hs64() { return tiny_config(128, 2); }

// One batch with its views. Sequence b has len[b] real tokens ([CLS] = 1 first, then ids, [PAD]
// = 0 after), segment B from the middle of the real tokens; every 7th real position (offset by
// b and the seed) is masked, and sequence 1's [CLS] row too. One sequence in four has NSP label
// 1: with balanced labels at initialisation the per-sequence NSP gradients (nearly the same
// [CLS] state times ±p) cancel to ~1% of their size, and rounding noise dominates what is
// left (measured on the CPU model: its own bf16 run is then 25% off fp32 on pooler.dense.weight,
// against 0.4% with one label in four).
struct HostBatch {
  std::vector<int> tokens, types, mask, mlm, nsp;
  BertInputs view() const { return {tokens.data(), types.data(), mask.data(), mlm.data(), nsp.data()}; }
};
HostBatch make_batch(int seed) {
  const int len[kB] = {32, 25, 17, 30};
  HostBatch h;
  const int N = kB * kT;
  h.tokens.assign(N, 0), h.types.assign(N, 0), h.mask.assign(N, 0), h.mlm.assign(N, -1), h.nsp.assign(kB, 0);
  for (int b = 0; b < kB; ++b) {
    for (int t = 0; t < len[b]; ++t) {
      const int i = b * kT + t;
      h.tokens[i] = t == 0 ? 1 : 2 + (13 * i + 7 * seed + 5) % (kV - 2);
      h.types[i] = t >= len[b] / 2 ? 1 : 0;
      h.mask[i] = 1;
      if (t > 0 && (t + b + seed) % 7 == 0) h.mlm[i] = h.tokens[i];
    }
    h.nsp[b] = (b + seed) % 4 == 0 ? 1 : 0;
  }
  h.mlm[1 * kT] = h.tokens[1 * kT];  // a masked [CLS] row
  return h;
}

struct CpuResult {
  BertStats stats;
  std::vector<float> grads;
};

// The CPU model's stats and gradients of grad_scale·loss for each batch in turn, accumulated.
CpuResult cpu_run(const BertConfig& config, const std::vector<float>& params,
                  const std::vector<HostBatch>& batches, float grad_scale) {
  cpu::Context cctx;
  Bert model(config, cctx, Precision::Fp32);
  std::copy(params.begin(), params.end(), model.params().data());
  model.plan(kB, kT);
  model.zero_grad();
  CpuResult r;
  for (const HostBatch& b : batches) r.stats = model.forward_backward(b.view(), kB, kT, grad_scale);
  r.grads.assign(model.grads().data(), model.grads().data() + model.num_params());
  return r;
}

std::vector<float> init_params(const BertConfig& config) {
  cpu::Context cctx;
  Bert model(config, cctx, Precision::Fp32);
  model.init_weights(4321);
  return {model.params().data(), model.params().data() + model.num_params()};
}

struct Tolerances {
  double loss, grad;
};
Tolerances tolerances(Precision p) {
  switch (p) {
    case Precision::Fp32:
      return {1e-5, 1e-4};
    case Precision::Tf32:
      return {1e-3, 2e-2};
    case Precision::Fp16:
      return {2e-2, 5e-2};
    case Precision::Bf16:
      return {2e-2, 1e-1};
  }
  return {0, 0};
}
float grad_scale_for(Precision p) { return p == Precision::Fp16 ? 1024.0f : 1.0f; }

std::vector<float> slice(const std::vector<float>& all, const ParamSpec& spec) {
  return {all.begin() + spec.offset, all.begin() + spec.offset + spec.numel};
}

double norm(const std::vector<float>& v) {
  double s = 0.0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

// Per tensor, ‖got − want‖ ≤ tol·‖want‖; except each layer's attention key bias, whose gradient
// is zero in exact arithmetic (softmax ignores a constant added to a row's scores: the CPU's is
// ~1e-11 against ~4e-5 for the query bias), so both sides are rounding noise and the error is
// measured against the same layer's query-bias gradient instead.
void expect_grads_near(const ParamTable& table, std::vector<float> got, float unscale,
                       const std::vector<float>& want, double tol, const std::string& what) {
  for (float& x : got) x *= unscale;
  const std::string key = "attention.self.key.bias";
  for (const ParamSpec& spec : table.specs()) {
    const std::vector<float> g = slice(got, spec), w = slice(want, spec);
    const size_t at = spec.name.find(key);
    if (at == std::string::npos) {
      EXPECT_LE(rel_err(g, w), tol) << what << ": gradient of " << spec.name;
      continue;
    }
    const std::string query = spec.name.substr(0, at) + "attention.self.query.bias";
    const double scale = norm(slice(want, table.get(query)));
    std::vector<float> diff(g.size());
    for (size_t i = 0; i < g.size(); ++i) diff[i] = g[i] - w[i];
    ASSERT_GT(scale, 0.0) << what << ": no gradient of " << query;
    EXPECT_LE(norm(diff) / scale, tol) << what << ": gradient of " << spec.name << " (against ‖d" << query << "‖)";
  }
}

void expect_stats_near(const BertStats& got, const BertStats& want, double tol, bool exact_hits,
                       const std::string& what) {
  EXPECT_LE(std::fabs(got.mlm_loss - want.mlm_loss), tol * std::fabs(want.mlm_loss))
      << what << ": MLM loss " << got.mlm_loss << " vs CPU " << want.mlm_loss;
  EXPECT_LE(std::fabs(got.nsp_loss - want.nsp_loss), tol * std::fabs(want.nsp_loss))
      << what << ": NSP loss " << got.nsp_loss << " vs CPU " << want.nsp_loss;
  EXPECT_EQ(got.mlm_count, want.mlm_count) << what;
  EXPECT_EQ(got.nsp_count, want.nsp_count) << what;
  // 16-bit / TF32 logits may reorder near-ties of the arg-max: a hit or two either way.
  const int slack = exact_hits ? 0 : 2;
  EXPECT_LE(std::abs(got.mlm_correct - want.mlm_correct), slack) << what << ": MLM arg-max hits";
  EXPECT_LE(std::abs(got.nsp_correct - want.nsp_correct), slack) << what << ": NSP arg-max hits";
}

struct Case {
  Precision precision;
  bool head64;  // the HS 64 config (flash for 16-bit)
};
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(precision_name(info.param.precision)) + (info.param.head64 ? "_hs64" : "_hs16");
}

class BertDeviceTest : public ::testing::TestWithParam<Case> {};

TEST_P(BertDeviceTest, LossesAndGradientsMatchTheCpuModel) {
  SKIP_WITHOUT_GPU();
  const Case c = GetParam();
  const BertConfig config = c.head64 ? hs64() : hs16();
  const Tolerances tol = tolerances(c.precision);
  const std::vector<float> params = init_params(config);
  const HostBatch batch = make_batch(0);
  const float scale = grad_scale_for(c.precision);
  const CpuResult ref = cpu_run(config, params, {batch}, 1.0f);

  cuda::BertDevice dev(config, c.precision, kB, kT, 0, ctx());
  const bool want_flash = c.head64 && (c.precision == Precision::Bf16 || c.precision == Precision::Fp16);
  EXPECT_EQ(dev.uses_flash_attention(), want_flash);
  ASSERT_EQ(dev.num_params(), params.size());
  dev.upload_params(params.data());
  const BertStats st = dev.forward_backward(batch.view(), kB, kT, scale, false);
  const std::string what = std::string(precision_name(c.precision)) + (c.head64 ? " HS 64" : " HS 16");
  expect_stats_near(st, ref.stats, tol.loss, c.precision == Precision::Fp32, what);
  std::vector<float> g(dev.num_params());
  dev.download_grads(g.data());
  expect_grads_near(dev.table(), g, 1.0f / scale, ref.grads, tol.grad, what);

  // evaluate: the same stats, gradients untouched.
  const BertStats ev = dev.evaluate(batch.view(), kB, kT);
  EXPECT_EQ(ev.mlm_loss, st.mlm_loss) << what;
  EXPECT_EQ(ev.nsp_loss, st.nsp_loss) << what;
  EXPECT_EQ(ev.mlm_correct, st.mlm_correct) << what;
  std::vector<float> g2(dev.num_params());
  dev.download_grads(g2.data());
  EXPECT_EQ(0, std::memcmp(g.data(), g2.data(), g.size() * sizeof(float)))
      << what << ": evaluate wrote gradients";
}

// Two micro-batches at grad_scale 0.5 each: the second call accumulates (+=), the CPU model
// accumulates by contract; the sums must agree tensor by tensor.
TEST_P(BertDeviceTest, AccumulatingTwoMicroBatchesMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const Case c = GetParam();
  const BertConfig config = c.head64 ? hs64() : hs16();
  const Tolerances tol = tolerances(c.precision);
  const std::vector<float> params = init_params(config);
  const std::vector<HostBatch> batches = {make_batch(0), make_batch(1)};
  const float scale = grad_scale_for(c.precision);
  const CpuResult ref = cpu_run(config, params, batches, 0.5f);
  cuda::BertDevice dev(config, c.precision, kB, kT, 0, ctx());
  dev.upload_params(params.data());
  dev.forward_backward(batches[0].view(), kB, kT, 0.5f * scale, false);
  const BertStats st = dev.forward_backward(batches[1].view(), kB, kT, 0.5f * scale, true);
  const std::string what = std::string(precision_name(c.precision)) + " accumulated";
  expect_stats_near(st, ref.stats, tol.loss, c.precision == Precision::Fp32, what);
  std::vector<float> g(dev.num_params());
  dev.download_grads(g.data());
  expect_grads_near(dev.table(), g, 1.0f / scale, ref.grads, tol.grad, what);
}

TEST_P(BertDeviceTest, RepeatedRunsAreBitIdentical) {
  SKIP_WITHOUT_GPU();
  const Case c = GetParam();
  const BertConfig config = c.head64 ? hs64() : hs16();
  const std::vector<float> params = init_params(config);
  const HostBatch batch = make_batch(2);
  cuda::BertDevice dev(config, c.precision, kB, kT, 0, ctx());
  dev.upload_params(params.data());
  std::vector<float> g1(dev.num_params()), g2(dev.num_params());
  const BertStats a = dev.forward_backward(batch.view(), kB, kT, 1.0f, false);
  dev.download_grads(g1.data());
  const BertStats b = dev.forward_backward(batch.view(), kB, kT, 1.0f, false);
  dev.download_grads(g2.data());
  EXPECT_EQ(a.mlm_loss, b.mlm_loss);
  EXPECT_EQ(a.nsp_loss, b.nsp_loss);
  EXPECT_EQ(0, std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Precisions, BertDeviceTest,
                         ::testing::Values(Case{Precision::Fp32, false}, Case{Precision::Tf32, false},
                                           Case{Precision::Bf16, false}, Case{Precision::Fp16, false},
                                           Case{Precision::Fp32, true}, Case{Precision::Bf16, true},
                                           Case{Precision::Fp16, true}),
                         case_name);

// Sophia's sampled pass against Bert::forward_backward_sampled from the same (seed, counter).
// fp32: the same drawn labels (a label differs only where a row's uniform lies within fp32
// rounding of a CDF boundary: not expected in this batch's ~20 rows), losses within 1e-5 and
// gradients within 1e-4. bf16 (flash): logits rounded to 16 bits move some CDF boundaries, so at
// least 80% of the labels agree and the gradients are finite.
TEST(BertDevice, SampledPassMatchesTheCpuModel) {
  SKIP_WITHOUT_GPU();
  for (const Case c : {Case{Precision::Fp32, false}, Case{Precision::Bf16, true}}) {
    const std::string what = std::string("sampled ") + precision_name(c.precision);
    const BertConfig config = c.head64 ? hs64() : hs16();
    const std::vector<float> params = init_params(config);
    const HostBatch batch = make_batch(3);
    cpu::Context cctx;
    Bert ref(config, cctx, Precision::Fp32);
    std::copy(params.begin(), params.end(), ref.params().data());
    ref.plan(kB, kT);
    ref.zero_grad();
    const BertStats want = ref.forward_backward_sampled(batch.view(), kB, kT, 1.0f, 77, 5);
    cuda::BertDevice dev(config, c.precision, kB, kT, 0, ctx());
    dev.upload_params(params.data());
    const BertStats got = dev.forward_backward_sampled(batch.view(), kB, kT, 1.0f, 77, 5);
    ASSERT_EQ(dev.sampled_mlm_labels().size(), ref.sampled_mlm_labels().size()) << what;
    ASSERT_EQ(dev.sampled_nsp_labels().size(), ref.sampled_nsp_labels().size()) << what;
    size_t same = 0;
    for (size_t i = 0; i < ref.sampled_mlm_labels().size(); ++i)
      same += dev.sampled_mlm_labels()[i] == ref.sampled_mlm_labels()[i];
    std::vector<float> g(dev.num_params());
    dev.download_grads(g.data());
    const std::vector<float> want_g(ref.grads().data(), ref.grads().data() + ref.num_params());
    if (c.precision == Precision::Fp32) {
      EXPECT_EQ(dev.sampled_mlm_labels(), ref.sampled_mlm_labels()) << what;
      EXPECT_EQ(dev.sampled_nsp_labels(), ref.sampled_nsp_labels()) << what;
      expect_stats_near(got, want, 1e-5, true, what);
      expect_grads_near(dev.table(), g, 1.0f, want_g, 1e-4, what);
    } else {
      EXPECT_GE(same * 5, ref.sampled_mlm_labels().size() * 4) << what << ": drawn MLM labels that agree";
      EXPECT_EQ(got.mlm_count, want.mlm_count) << what;
      size_t non_finite = 0;
      for (float x : g) non_finite += !std::isfinite(x);
      EXPECT_EQ(non_finite, 0u) << what;
    }
  }
}

// A batch without mask, types, MLM labels or NSP labels (every view null but the tokens): no
// loss, nothing to average, as the CPU model reports.
TEST(BertDevice, ABatchWithOnlyTokensHasNoLoss) {
  SKIP_WITHOUT_GPU();
  const BertConfig config = hs16();
  cuda::BertDevice dev(config, Precision::Fp32, kB, kT, 0, ctx());
  dev.upload_params(init_params(config).data());
  const HostBatch h = make_batch(0);
  BertInputs only_tokens;
  only_tokens.tokens = h.tokens.data();
  const BertStats st = dev.forward_backward(only_tokens, kB, kT, 1.0f, false);
  EXPECT_EQ(st.mlm_count, 0);
  EXPECT_EQ(st.nsp_count, 0);
  EXPECT_EQ(st.loss(), 0.0f);
}

// Sizes and batches the device model refuses, each with one Error naming the problem.
TEST(BertDevice, RefusesBadSizesAndBatchesWithOneClearError) {
  SKIP_WITHOUT_GPU();
  const BertConfig config = hs16();
  using gputest::expect_error_contains;
  expect_error_contains([&] { cuda::BertDevice(config, Precision::Fp32, 1, 65, 0, ctx()); }, "64 positions");
  expect_error_contains([&] { cuda::BertDevice(config, Precision::Fp32, 0, 8, 0, ctx()); }, "[bert-cuda]");
  cuda::BertDevice dev(config, Precision::Fp32, 2, 16, 4, ctx());  // at most 4 masked positions
  HostBatch big = make_batch(0);                                   // 4x32 tokens
  expect_error_contains([&] { dev.forward_backward(big.view(), 4, 16, 1.0f, false); },
                        "exceeds the planned 2x16");
  expect_error_contains([&] { dev.forward_backward(big.view(), 2, 17, 1.0f, false); },
                        "exceeds the planned 2x16");
  HostBatch h = make_batch(0);
  for (int i = 0; i < 2 * 16; ++i) h.mlm[i] = i % 3 == 0 ? h.tokens[i] : -1;  // 11 masked positions
  expect_error_contains([&] { dev.forward_backward(h.view(), 2, 16, 1.0f, false); }, "masked positions");
  h = make_batch(0);
  h.tokens[3] = kV;
  expect_error_contains([&] { dev.forward_backward(h.view(), 2, 16, 1.0f, false); },
                        "outside the BERT vocabulary");
  h = make_batch(0);
  for (int t = 0; t < 16; ++t) h.mask[16 + t] = 0;
  expect_error_contains([&] { dev.forward_backward(h.view(), 2, 16, 1.0f, false); }, "all padding");
}

// Runs without a GPU: the arena plan's bytes against a hand count of bert_device_pass.cpp's
// buffers (fp32 naive attention, and bf16 with flash's lse), each rounded up to 256 bytes.
TEST(BertDevicePlan, ArenaBytesMatchAHandCount) {
  auto r = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const BertConfig c64 = hs16(), c128 = hs64();
  for (const bool flash : {false, true}) {
    const BertConfig& c = flash ? c128 : c64;
    const size_t B = 2, T = 8, BT = 16, M = 5, C = c.hidden, I = c.intermediate, Vp = c.padded_vocab_size,
                 NH = c.n_head, enc = 1000;
    const size_t e = flash ? 2 : 4, f = 4;
    // flash saves lse [B,NH,T] fp32 and needs D [B,NH,T] fp32 as scratch; the naive path saves
    // P [B,NH,T,T] and uses q/k/v/heads/dq/dk/dv + dS in T and the fp32 scores.
    const size_t att = flash ? B * NH * T * f : B * NH * T * T * e;
    const size_t attn_scratch =
        flash ? B * NH * T * f : 7 * r(BT * C * e) + r(B * NH * T * T * f) + r(B * NH * T * T * e);
    size_t want = r(BT * C * e) * 2 + r(BT * f) * 2;  // emb, emb_ln, mean, rstd
    // qkv; P or lse; atty, res1, ln1, res2, ln2; two (mean, rstd) pairs; fch, fch_gelu
    const size_t layer = r(BT * 3 * C * e) + r(att) + r(BT * C * e) * 5 + r(BT * f) * 4 + r(BT * I * e) * 2;
    want += c.n_layer * layer;
    want += r(B * C * e) * 2 + r(B * 2 * e);                           // cls_in, pooled, nsp logits
    want += r(M * C * e) * 4 + r(M * f) * 2 + r(M * Vp * e);           // MLM head
    want += r((3 * BT + 3 * M + 3 * B) * 4) + r((3 * M + 3 * B) * 4);  // batch words, stats words
    want += r(BT * C * e) * 4 + r(BT * 3 * C * e) + r(BT * I * e);     // proj, dh, dres, datty; dqkv; dfch
    want += r(B * C * e) * 2 + r(M * C * e) * 2;                       // dpooled, dcls; dmlm_a, dmlm_b
    want += r(attn_scratch) + r(enc) + r(BT * e);                      // attention, encoder sort, ones
    want += r(BT * 2 * C * f);  // LayerNorm backward's (dweight, dbias) partial sums: one chunk per row here
    EXPECT_EQ(cuda::bert_device_arena_bytes(c, flash ? Precision::Bf16 : Precision::Fp32,
                                            cuda::BertAttention::Auto, B, T, M, enc),
              want)
        << (flash ? "bf16 flash" : "fp32 naive");
  }
}

// The host half of a step (runs without a GPU): the batch words BertDevice uploads and the stats
// it reads back.
TEST(BertDeviceStaging, BatchWordsFollowTheCpuConventions) {
  namespace d = cuda::bert_device_detail;
  const HostBatch h = make_batch(0);
  const int PN = kB * kT, PM = 100;
  const d::BatchLayout L(PN, PM, kB);
  std::vector<int32_t> w;
  std::vector<int> targets;
  const d::StepShape s = d::stage_batch(L, PM, h.view(), kB, kT, 2.0f, w, targets);
  ASSERT_EQ(w.size(), L.words);
  std::vector<int> want_pos;
  for (int i = 0; i < PN; ++i)
    if (h.mlm[i] != -1) want_pos.push_back(i);
  const int M = static_cast<int>(want_pos.size());
  ASSERT_EQ(s.M, M);
  EXPECT_EQ(s.Mr, 64) << "M rounded up to a multiple of 64";
  EXPECT_TRUE(s.nsp && s.masked && !s.backward);
  auto as_float = [&](size_t word) {
    float x;
    std::memcpy(&x, &w[word], sizeof(float));
    return x;
  };
  for (int r = 0; r < M; ++r) {
    EXPECT_EQ(w[L.mlm_pos + r], want_pos[r]) << "masked row " << r;
    EXPECT_EQ(w[L.mlm_targets + r], h.mlm[want_pos[r]]);
    EXPECT_EQ(targets[r], h.mlm[want_pos[r]]);
    EXPECT_EQ(as_float(L.mlm_dloss + r), 2.0f / M);
  }
  for (int r = M; r < s.Mr; ++r) EXPECT_EQ(w[L.mlm_targets + r], -1) << "padding row " << r;
  for (int b = 0; b < kB; ++b) {
    EXPECT_EQ(w[L.cls_pos + b], b * kT);
    EXPECT_EQ(w[L.nsp_labels + b], h.nsp[b]);
    EXPECT_EQ(as_float(L.nsp_dloss + b), 2.0f / kB);
  }
  for (int i = 0; i < PN; ++i) {
    ASSERT_EQ(w[L.tokens + i], h.tokens[i]);
    ASSERT_EQ(w[L.types + i], h.types[i]);
    ASSERT_EQ(w[L.mask + i], h.mask[i]);
  }

  // Only tokens: type 0, every key real, no loss rows. A plan of fewer rows caps Mr; one of
  // fewer masked positions than the batch has is an Error.
  BertInputs tokens_only;
  tokens_only.tokens = h.tokens.data();
  const d::StepShape t = d::stage_batch(L, PM, tokens_only, kB, kT, 1.0f, w, targets);
  EXPECT_TRUE(t.M == 0 && t.Mr == 0 && !t.nsp && !t.masked);
  EXPECT_EQ(w[L.types + 5], 0);
  EXPECT_EQ(w[L.mask + PN - 1], 1);
  EXPECT_EQ(d::stage_batch(L, M + 1, h.view(), kB, kT, 1.0f, w, targets).Mr, M + 1);
  gputest::expect_error_contains([&] { d::stage_batch(L, M - 1, h.view(), kB, kT, 1.0f, w, targets); },
                                 "more masked positions than the planned");

  // Stats: means over the M and B rows in order, arg-max hits against the labels.
  const d::StatsLayout O(PM, kB);
  std::vector<int32_t> words(O.words, 0);
  auto put = [&](size_t word, float x) { std::memcpy(&words[word], &x, sizeof(float)); };
  for (int r = 0; r < M; ++r) {
    put(O.mlm_losses + r, static_cast<float>(r + 1));
    words[O.mlm_best + r] = r % 2 == 0 ? targets[r] : -5;
  }
  for (int b = 0; b < kB; ++b) {
    put(O.nsp_losses + b, 0.5f);
    words[O.nsp_best + b] = b == 0 ? h.nsp[0] : 1 - h.nsp[b];
  }
  const d::StepShape full = d::stage_batch(L, PM, h.view(), kB, kT, 1.0f, w, targets);
  const BertStats st = d::collect_stats(O, full, words, targets.data(), h.nsp.data());
  EXPECT_FLOAT_EQ(st.mlm_loss, (M + 1) / 2.0f);
  EXPECT_EQ(st.mlm_count, M);
  EXPECT_EQ(st.mlm_correct, (M + 1) / 2);
  EXPECT_FLOAT_EQ(st.nsp_loss, 0.5f);
  EXPECT_EQ(st.nsp_count, kB);
  EXPECT_EQ(st.nsp_correct, 1);
}

// The CPU reference on the test batch (runs without a GPU): the batch exercises what the device
// test compares (masked rows incl. a [CLS] row, NSP labels, padding) and the losses are finite.
TEST(BertDeviceReference, TheTestBatchExercisesBothHeads) {
  const BertConfig config = hs16();
  const std::vector<float> params = init_params(config);
  const HostBatch batch = make_batch(0);
  const CpuResult r = cpu_run(config, params, {batch}, 1.0f);
  EXPECT_GT(r.stats.mlm_count, 10);
  EXPECT_EQ(r.stats.nsp_count, kB);
  EXPECT_TRUE(std::isfinite(r.stats.mlm_loss) && std::isfinite(r.stats.nsp_loss));
  EXPECT_NEAR(r.stats.mlm_loss, std::log(static_cast<float>(kV)), 0.5f);  // near-uniform at init
  EXPECT_NE(batch.mlm[kT], -1) << "sequence 1's [CLS] row must be masked";
  int padded = 0;
  for (int m : batch.mask) padded += m == 0;
  EXPECT_GT(padded, 0);
}

// ---- the gradient-ready hook ------------------------------------------------------------------

// The hook's ranges from the table alone (no GPU): the heads (pooler, MLM transform and bias,
// NSP), layer L-1 ... 0, then the embeddings with the tied word embeddings, each starting at its
// first tensor, contiguous, and every tensor in exactly one of them (a 12-layer table: layer 10
// must not be taken for layer 1's).
TEST(BertDeviceReference, GradReadyRangesCoverTheTableInBackwardOrder) {
  for (int L : {1, 2, 12}) {
    BertConfig c = hs16();
    c.n_layer = L;
    const ParamTable table = bert_param_table(c);
    const std::vector<std::pair<size_t, size_t>> r = cuda::BertDevice::grad_ready_ranges(c);
    ASSERT_EQ(r.size(), static_cast<size_t>(L) + 2) << "L=" << L;
    auto first_of_layer = [&](int l) {
      return table.get("bert.encoder.layer." + std::to_string(l) + ".attention.self.query.weight").offset;
    };
    EXPECT_EQ(r.front(), std::make_pair(table.get("bert.pooler.dense.weight").offset, table.total()));
    for (int l = L - 1; l >= 0; --l) EXPECT_EQ(r[1 + (L - 1 - l)].first, first_of_layer(l)) << "layer " << l;
    EXPECT_EQ(r.back(), std::make_pair(size_t{0}, first_of_layer(0)));
    for (size_t i = 1; i < r.size(); ++i) EXPECT_EQ(r[i].second, r[i - 1].first) << "gap or overlap at " << i;
    for (const ParamSpec& spec : table.specs()) {
      int holding = 0;
      size_t which = 0;
      for (size_t i = 0; i < r.size(); ++i)
        if (spec.offset >= r[i].first && spec.offset + spec.numel <= r[i].second) ++holding, which = i;
      EXPECT_EQ(holding, 1) << spec.name << " (L=" << L << ")";
      const bool head = spec.name.rfind("bert.pooler.", 0) == 0 || spec.name.rfind("cls.", 0) == 0;
      const bool embedding = spec.name.rfind("bert.embeddings.", 0) == 0;
      const size_t want = head ? 0 : embedding ? r.size() - 1 : which;  // layers: checked above
      EXPECT_EQ(which, want) << spec.name;
    }
  }
}

struct HookCase {
  Precision precision;
  bool head64;
  int accum;  // micro-batches per step; the hook is set for the last one (the stepper's use)
};
std::string hook_name(const HookCase& c) {
  return std::string(precision_name(c.precision)) + (c.head64 ? "_hs64" : "_hs16") + "_accum" +
         std::to_string(c.accum);
}
std::string hook_case_name(const ::testing::TestParamInfo<HookCase>& info) { return hook_name(info.param); }
class BertDeviceHookTest : public ::testing::TestWithParam<HookCase> {};

// The hook in use: one call per range, in grad_ready_ranges' order, on the last micro-batch
// only; and at each call the range's fp32 gradients (read after a stream sync inside the hook,
// which a real consumer must not do) already equal, bit for bit, the final gradients of the
// same micro-batches run without the hook, as do the final gradients themselves. The fp32
// gradient buffer is poisoned (NaN) before every run, so a range announced before its last
// write (the tied word embeddings before the embedding backward) or, in 16 bits, before its
// cast shows a partial sum or NaN. Without accumulation the sampled pass (Sophia's) too.
TEST_P(BertDeviceHookTest, RangesAreFinalWhenAnnouncedInBackwardOrder) {
  SKIP_WITHOUT_GPU();
  const HookCase c = GetParam();
  const BertConfig config = c.head64 ? hs64() : hs16();
  const std::vector<float> params = init_params(config);
  const float scale = grad_scale_for(c.precision);
  std::vector<HostBatch> batches;
  for (int m = 0; m < c.accum; ++m) batches.push_back(make_batch(m));
  cuda::BertDevice dev(config, c.precision, kB, kT, 0, ctx());
  dev.upload_params(params.data());
  const size_t n = dev.num_params();
  const std::vector<std::pair<size_t, size_t>> want_ranges = cuda::BertDevice::grad_ready_ranges(config);

  std::vector<std::pair<size_t, size_t>> calls;
  std::vector<std::vector<float>> at_call;
  const cuda::BertDevice::GradReadyFn record = [&](size_t b, size_t e) {
    calls.emplace_back(b, e);
    ctx().synchronize();
    at_call.emplace_back(e - b);
    cuda::copy_to_host(at_call.back().data(), dev.grads_device() + b, (e - b) * sizeof(float), ctx());
  };
  auto run = [&](bool hooked, bool sampled) {
    calls.clear(), at_call.clear();
    cuda::fill_bytes(dev.grads_device(), 0xFF, n * sizeof(float), ctx());
    for (int m = 0; m < c.accum; ++m) {
      dev.set_grad_ready(hooked && m + 1 == c.accum ? record : nullptr);
      if (sampled)
        dev.forward_backward_sampled(batches[m].view(), kB, kT, scale, 77, 5);
      else
        dev.forward_backward(batches[m].view(), kB, kT, scale / static_cast<float>(c.accum), m > 0);
    }
    dev.set_grad_ready(nullptr);
    std::vector<float> g(n);
    dev.download_grads(g.data());
    return g;
  };

  for (bool sampled : {false, true}) {
    if (sampled && c.accum > 1) continue;  // the curvature pass writes (=) one micro-batch
    const std::string what = hook_name(c) + (sampled ? " sampled" : "");
    const std::vector<float> want = run(false, sampled);
    EXPECT_TRUE(calls.empty()) << what << ": a call without a hook";
    size_t non_finite = 0;
    for (float x : want) non_finite += !std::isfinite(x);
    ASSERT_EQ(non_finite, 0u) << what << ": gradients left unwritten (poison) without the hook";
    const std::vector<float> got = run(true, sampled);
    ASSERT_EQ(calls, want_ranges) << what << ": one call per range, in backward order";
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), n * sizeof(float)))
        << what << ": with vs without the hook";
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto [b, e] = calls[i];
      size_t differ = 0;
      for (size_t k = 0; k < e - b; ++k)
        differ += std::memcmp(&at_call[i][k], &want[b + k], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0u) << what << ": range " << i << " [" << b << ", " << e
                            << ") was not final when announced (elements that changed later)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, BertDeviceHookTest,
                         ::testing::Values(HookCase{Precision::Fp32, false, 1},
                                           HookCase{Precision::Fp32, false, 2},
                                           HookCase{Precision::Bf16, true, 1},
                                           HookCase{Precision::Bf16, true, 2},
                                           HookCase{Precision::Fp16, false, 2}),
                         hook_case_name);

}  // namespace
}  // namespace mptrain
