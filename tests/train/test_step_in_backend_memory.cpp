// The whole training step — model, loss, backward, accumulation, fp16 scaling, norm, clip,
// AdamW or Sophia with its curvature pass — on a backend whose memory the host cannot touch
// (tests/common/fenced_backend.h): the models and the step reach their tensors only through the
// op interface and the explicit staging and download points, as on a GPU, under the CPU's plan
// and the GPU's plan alike. Since the kernels are the CPU's, every bit must match the same
// steps on the CPU backend.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cpu/cpu_backend.h"
#include "common/fenced_backend.h"
#include "common/host_backend.h"
#include "common/test_util.h"
#include "common/tiny_gpt2.h"
#include "io/checkpoint_dir.h"
#include "model/bert.h"
#include "model/gpt2.h"
#include "optim/adamw.h"
#include "optim/sophia.h"
#include "precision/loss_scaler.h"
#include "precision/policy.h"
#include "train/checkpoint.h"
#include "train/step.h"

namespace mptrain {
namespace {

using test::FencedCpuBackend;

// A case: the precision, whose plan (the CPU's or the GPU's), and which optimizer.
struct Case {
  Precision precision;
  bool gpu_plan;
  bool sophia;
  std::string name() const {
    return std::string(precision_name(precision)) +
           (gpu_plan ? " under the GPU's plan" : " under the CPU's plan") + (sophia ? ", Sophia" : ", AdamW");
  }
};

const Case kCases[] = {
    {Precision::Fp32, false, false}, {Precision::Bf16, false, true},  {Precision::Bf16, true, false},
    {Precision::Fp16, true, true},   {Precision::Tf32, false, false},
};

Policy policy_of(const Case& c) {
  return make_policy(c.precision, {}, c.gpu_plan ? kCudaCaps : cpu::CpuBackend(host_context()).caps());
}

std::unique_ptr<Optimizer> optimizer_of(const Case& c, const ParamTable& table, Backend& be) {
  if (!c.sophia) return std::make_unique<AdamW>(table, AdamWHyper{}, be);
  SophiaHyper hyper;
  hyper.k = 1;  // a curvature pass after every step
  return std::make_unique<Sophia>(table, hyper, 64.0, 11, be);
}

// What a run leaves: the step statistics, the parameters and the optimizer state, on the host.
struct Outcome {
  std::vector<StepStats> stats;
  std::vector<float> params;
  std::vector<std::vector<float>> state;
};

template <class Model>
Outcome collect(Model& model, const Optimizer& opt, std::vector<StepStats> stats) {
  Outcome o{std::move(stats), std::vector<float>(model.num_params()), {}};
  model.params().download(o.params.data(), o.params.size());
  for (const OptimizerState& s : opt.state()) {
    o.state.emplace_back(s.buffer.size());
    s.buffer.download(o.state.back().data(), s.buffer.size());
  }
  return o;
}

void expect_same(const Outcome& fenced, const Outcome& host, const std::string& what) {
  ASSERT_EQ(fenced.stats.size(), host.stats.size());
  for (size_t i = 0; i < host.stats.size(); ++i) {
    EXPECT_EQ(fenced.stats[i].loss, host.stats[i].loss) << what << ", step " << i + 1;
    EXPECT_EQ(fenced.stats[i].grad_norm, host.stats[i].grad_norm) << what << ", step " << i + 1;
    EXPECT_EQ(fenced.stats[i].skipped, host.stats[i].skipped) << what << ", step " << i + 1;
    EXPECT_EQ(fenced.stats[i].curvature, host.stats[i].curvature) << what << ", step " << i + 1;
    EXPECT_EQ(fenced.stats[i].win_rate, host.stats[i].win_rate) << what << ", step " << i + 1;
  }
  ASSERT_EQ(fenced.params.size(), host.params.size());
  EXPECT_EQ(std::memcmp(fenced.params.data(), host.params.data(), host.params.size() * sizeof(float)), 0)
      << what << ": the parameters differ";
  ASSERT_EQ(fenced.state.size(), host.state.size());
  for (size_t s = 0; s < host.state.size(); ++s)
    EXPECT_EQ(std::memcmp(fenced.state[s].data(), host.state[s].data(), host.state[s].size() * sizeof(float)),
              0)
        << what << ": optimizer state " << s << " differs";
}

// --- GPT-2 ---

constexpr int kB = 2, kT = 16, kAccum = 2, kSteps = 2;

// kSteps steps of kAccum micro-batches on `be` (a fenced backend, or the CPU's).
// With `logits`: then an evaluation forward's logits() and losses() (their download points).
// With `graphs`: the micro-batches' passes replayed from a graph (model/gpt2.h's set_graphs), and
// the ranges the gradient-ready hook saw, in order, into *handed.
Outcome run_gpt2(const Case& c, std::unique_ptr<Backend> be, std::vector<float>* logits, bool graphs = false,
                 std::vector<ParamRange>* handed = nullptr) {
  Gpt2 model(test::tiny_gpt2_config(), std::move(be), policy_of(c));
  model.init_weights(5);
  model.plan(kB, kT);
  model.set_graphs(graphs);
  if (handed) model.set_grads_ready_hook([handed](ParamRange r) { handed->push_back(r); });
  const std::unique_ptr<Optimizer> opt = optimizer_of(c, model.table(), model.backend());
  LossScaler scaler(LossScalerConfig{1024.0f, 2.0f, 0.5f, 2000});
  LossScaler* s = c.precision == Precision::Fp16 ? &scaler : nullptr;
  int draw = 0;
  const auto batch = [&](int* in, int* tg) {
    for (int i = 0; i < kB * kT; ++i) {
      in[i] = (i * 7 + draw * 13) % 61;
      tg[i] = i % 9 == 4 ? -1 : (i * 11 + draw * 3 + 1) % 61;  // some positions without a label
    }
    ++draw;
  };
  std::vector<int> in(kB * kT), tg(kB * kT);
  std::vector<StepStats> stats;
  for (int t = 1; t <= kSteps; ++t)
    stats.push_back(train_step(model, *opt, batch, kB, kT, kAccum, 1e-3f, 1.0f, t, in.data(), tg.data(), s));
  if (logits) {
    batch(in.data(), tg.data());
    model.forward(in.data(), tg.data(), kB, kT);
    const float* l = model.logits();
    logits->assign(l, l + static_cast<size_t>(kB) * kT * 64);
    const float* losses = model.losses();
    logits->insert(logits->end(), losses, losses + kB * kT);
  }
  return collect(model, *opt, stats);
}

TEST(StepInBackendMemory, Gpt2StepsTouchTheirTensorsOnlyThroughTheBackend) {
  for (const Case& c : kCases) {
    std::vector<float> fenced_logits, host_logits;
    const Outcome a = run_gpt2(c, std::make_unique<FencedCpuBackend>(host_context()), &fenced_logits);
    const Outcome b = run_gpt2(c, std::make_unique<cpu::CpuBackend>(host_context()), &host_logits);
    expect_same(a, b, "GPT-2 " + c.name());
    EXPECT_EQ(fenced_logits, host_logits) << "GPT-2 " << c.name() << ": logits() or losses() differ";
  }
}

// A pass captured once and replayed (the CPU's graphs: its recorded calls) stages and reads
// through the same points and enqueues the same work: the steps — an eager first micro-batch, the
// capture, replays, with Sophia's eager curvature passes between them — leave the bits of the
// enqueued steps, and the gradient-ready hook sees the same ranges in the same order.
TEST(StepInBackendMemory, Gpt2StepsReplayedFromAGraphMatchTheEnqueuedSteps) {
  for (const Case& c : kCases) {
    std::vector<float> replayed_logits, enqueued_logits;
    std::vector<ParamRange> replayed_ranges, enqueued_ranges;
    const Outcome a = run_gpt2(c, std::make_unique<FencedCpuBackend>(host_context()), &replayed_logits, true,
                               &replayed_ranges);
    const Outcome b = run_gpt2(c, std::make_unique<cpu::CpuBackend>(host_context()), &enqueued_logits, false,
                               &enqueued_ranges);
    expect_same(a, b, "GPT-2 replayed from a graph, " + c.name());
    EXPECT_EQ(replayed_logits, enqueued_logits) << "GPT-2 " << c.name() << ": logits() or losses() differ";
    ASSERT_EQ(replayed_ranges.size(), enqueued_ranges.size()) << c.name();
    for (size_t i = 0; i < enqueued_ranges.size(); ++i)
      EXPECT_TRUE(replayed_ranges[i].begin == enqueued_ranges[i].begin &&
                  replayed_ranges[i].end == enqueued_ranges[i].end)
          << c.name() << ": range " << i;
  }
}

// The child's own SIGSEGV handler says the fault happened and exits with a code of its own:
// the test then proves a segmentation fault (not some other death), and under AddressSanitizer
// the deliberate fault is not reported as a memory error (ASan yields to a user handler).
void exit_on_segv(int) {
  static const char kSaid[] = "host touched fenced memory\n";
  (void)!write(2, kSaid, sizeof kSaid - 1);
  _exit(42);
}

// A model whose memory is fenced faults when the host touches it: the fence itself works.
TEST(StepInBackendMemoryDeathTest, AHostReadOfFencedMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Gpt2 model(test::tiny_gpt2_config(), std::make_unique<FencedCpuBackend>(host_context()),
                   make_policy(Precision::Fp32));
        model.init_weights(1);
        struct sigaction sa {};
        sa.sa_handler = exit_on_segv;
        sigaction(SIGSEGV, &sa, nullptr);
        volatile float x = model.params()[0];
        (void)x;
      },
      ::testing::ExitedWithCode(42), "host touched fenced memory");
}

// Ids left on the host are refused by the op that would read them, naming it.
TEST(StepInBackendMemory, AnOpGivenHostMemoryIsRefused) {
  FencedCpuBackend be(host_context());
  std::vector<float> host(8);
  FloatBuffer dev(8, be.memory());
  try {
    be.cast(View::f32(dev.data(), {8}), View::f32(host.data(), {8}));
    FAIL() << "a host tensor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[fenced] cast: tensor fp32[8] is not in the backend's memory"),
              std::string::npos)
        << e.what();
  }
}

// A checkpoint written from the backend's memory and read back into it (or into the CPU's)
// holds the same bits: the parameters and the optimizer state cross through host mirrors.
TEST(StepInBackendMemory, Gpt2CheckpointsRoundTripThroughTheBackendsMemory) {
  const Case c{Precision::Bf16, true, false};
  Gpt2 model(test::tiny_gpt2_config(), std::make_unique<FencedCpuBackend>(host_context()), policy_of(c));
  model.init_weights(5);
  model.plan(kB, kT);
  AdamW opt(model.table(), AdamWHyper{}, model.backend());
  std::vector<int> in(kB * kT), tg(kB * kT);
  const auto batch = [](int* a, int* b) {
    for (int i = 0; i < kB * kT; ++i) a[i] = (i * 5) % 61, b[i] = (i * 3 + 1) % 61;
  };
  train_step(model, opt, batch, kB, kT, 1, 1e-3f, 1.0f, 1, in.data(), tg.data());
  const Outcome before = collect(model, opt, {});
  testing::TempDir dir;
  TrainState state;
  state.step = 1;
  save_checkpoint(dir.path(), model, opt, state, 0);
  const std::string ckpt = dir / checkpoint_name(1);
  for (const bool fenced : {true, false}) {
    std::unique_ptr<Backend> be =
        fenced ? std::unique_ptr<Backend>(std::make_unique<FencedCpuBackend>(host_context()))
               : std::make_unique<cpu::CpuBackend>(host_context());
    Gpt2 back(test::tiny_gpt2_config(), std::move(be), policy_of(c));
    AdamW back_opt(back.table(), AdamWHyper{}, back.backend());
    load_checkpoint_model(ckpt, back);
    load_checkpoint_optimizer(ckpt, back.table(), back_opt);
    expect_same(collect(back, back_opt, {}), before, fenced ? "into fenced memory" : "into the CPU's memory");
  }
}

// --- BERT ---

struct BertCase {
  BertConfig config;
  int B = 2, T = 12;
  std::vector<int> ids, types, mask, mlm, nsp;
  BertInputs inputs() const { return {ids.data(), types.data(), mask.data(), mlm.data(), nsp.data()}; }
};

// [CLS] A [SEP] B [SEP] then padding, a few real tokens masked; `draw` varies the batch.
BertCase bert_case(int draw) {
  BertCase k;
  k.config.n_layer = 2;
  k.config.n_head = 2;
  k.config.hidden = 32;
  k.config.intermediate = 48;
  k.config.vocab_size = 61;
  k.config.padded_vocab_size = 64;
  k.config.max_position = 16;
  const int pads[] = {0, 3};
  for (int b = 0; b < k.B; ++b) {
    const int len = k.T - pads[b], split = len / 2;
    for (int t = 0; t < k.T; ++t) {
      int id = 5 + (b * 31 + t * 17 + draw * 7) % (k.config.vocab_size - 5), type = t > split ? 1 : 0,
          label = -1;
      if (t == 0) id = 2;
      if (t == split || t == len - 1) id = 3;
      if (t >= len) id = 0, type = 0;
      if (t < len && id != 2 && id != 3 && (b * 7 + t + draw) % 4 == 1) {
        label = id;
        id = 4;
      }
      k.ids.push_back(id);
      k.types.push_back(type);
      k.mask.push_back(t < len ? 1 : 0);
      k.mlm.push_back(label);
    }
  }
  k.nsp = {draw % 2, 1};
  return k;
}

Outcome run_bert(const Case& c, std::unique_ptr<Backend> be, std::vector<float>* heads = nullptr) {
  const BertCase first = bert_case(0);
  Bert model(first.config, std::move(be), policy_of(c));
  model.init_weights(9);
  model.plan(first.B, first.T);
  const std::unique_ptr<Optimizer> opt = optimizer_of(c, model.table(), model.backend());
  LossScaler scaler(LossScalerConfig{1024.0f, 2.0f, 0.5f, 2000});
  LossScaler* s = c.precision == Precision::Fp16 ? &scaler : nullptr;
  int draw = 0;
  BertCase batch = first;
  StepModel m;
  m.table = &model.table();
  m.params = [&model]() -> FloatBuffer& { return model.params(); };
  m.grads = &model.grads();
  m.micro_step = [&](float grad_scale) {
    batch = bert_case(draw++);
    return model.forward_backward(batch.inputs(), batch.B, batch.T, grad_scale).loss();
  };
  m.curvature = [&](float grad_scale, uint64_t seed, uint64_t counter) {
    return model.forward_backward_sampled(batch.inputs(), batch.B, batch.T, grad_scale, seed, counter).loss();
  };
  std::vector<StepStats> stats;
  for (int t = 1; t <= kSteps; ++t)
    stats.push_back(train_step(m, *opt, kAccum, 1e-3f, 1.0f, t, s, nullptr, false));
  if (heads) {
    const BertCase e = bert_case(draw);
    const BertStats st = model.forward(e.inputs(), e.B, e.T);
    const size_t rows = model.mlm_positions().size();
    const float* mlm = model.mlm_logits();
    heads->assign(mlm, mlm + rows * 64);
    const float* nsp = model.nsp_logits();
    heads->insert(heads->end(), nsp, nsp + 2 * Bert::kNspClasses);
    heads->push_back(st.mlm_loss);
    heads->push_back(static_cast<float>(st.mlm_correct));
    if (c.sophia) {
      const std::vector<int>& drawn = model.sampled_mlm_labels();
      heads->insert(heads->end(), drawn.begin(), drawn.end());
    }
  }
  return collect(model, *opt, stats);
}

TEST(StepInBackendMemory, BertStepsTouchTheirTensorsOnlyThroughTheBackend) {
  for (const Case& c : kCases) {
    std::vector<float> fenced_heads, host_heads;
    const Outcome a = run_bert(c, std::make_unique<FencedCpuBackend>(host_context()), &fenced_heads);
    const Outcome b = run_bert(c, std::make_unique<cpu::CpuBackend>(host_context()), &host_heads);
    expect_same(a, b, "BERT " + c.name());
    EXPECT_EQ(fenced_heads, host_heads) << "BERT " << c.name() << ": the heads' logits or stats differ";
  }
}

}  // namespace
}  // namespace mptrain

namespace mptrain {
namespace {

// A pass stages its host values, enqueues its ops, then reads its results: no host transfer
// between two ops (what lets a GPU run the pass without a sync and capture it in a graph).
// The first pass of each model also refreshes the weight copies (ops before the staging), so
// the second, with the copies fresh, is the one traced: "TOT". Under every plan, with and
// without backward, and Sophia's sampled pass.
TEST(StepInBackendMemory, APassStagesThenEnqueuesThenReads) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name());
    {
      auto owned = std::make_unique<FencedCpuBackend>(host_context());
      FencedCpuBackend& be = *owned;
      Gpt2 model(test::tiny_gpt2_config(), std::move(owned), policy_of(c));
      model.init_weights(5);
      model.plan(kB, kT);
      std::vector<int> in(kB * kT), tg(kB * kT);
      for (int i = 0; i < kB * kT; ++i) in[i] = i % 61, tg[i] = (i * 5 + 1) % 61;
      model.forward(in.data(), tg.data(), kB, kT);
      be.take_trace();
      model.forward(in.data(), tg.data(), kB, kT);
      EXPECT_EQ(be.take_trace(), "TOT") << "GPT-2 forward";
      model.forward_backward(in.data(), tg.data(), kB, kT, 1.0f);
      EXPECT_EQ(be.take_trace(), "TOT") << "GPT-2 forward_backward";
      model.forward_backward_sampled(in.data(), tg.data(), kB, kT, 1.0f, 3, 4);
      EXPECT_EQ(be.take_trace(), "TOT") << "GPT-2 forward_backward_sampled";
    }
    {
      auto owned = std::make_unique<FencedCpuBackend>(host_context());
      FencedCpuBackend& be = *owned;
      const BertCase k = bert_case(1);
      Bert model(k.config, std::move(owned), policy_of(c));
      model.init_weights(9);
      model.plan(k.B, k.T);
      model.forward(k.inputs(), k.B, k.T);
      be.take_trace();
      model.forward(k.inputs(), k.B, k.T);
      EXPECT_EQ(be.take_trace(), "TOT") << "BERT forward";
      model.forward_backward(k.inputs(), k.B, k.T, 1.0f);
      EXPECT_EQ(be.take_trace(), "TOT") << "BERT forward_backward";
      model.forward_backward_sampled(k.inputs(), k.B, k.T, 1.0f, 3, 4);
      EXPECT_EQ(be.take_trace(), "TOT") << "BERT forward_backward_sampled";
    }
  }
}

}  // namespace
}  // namespace mptrain
