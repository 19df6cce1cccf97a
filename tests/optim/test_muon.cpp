// Muon (optim/muon.h):
//  - which tensors are its matrices, in GPT-2 and BERT, with q, k, v as three or as one
//  - five steps of a real GPT-2's gradients against tests/ref/muon_reference.py (PyTorch, written
//    from the algorithm): fp32 within 1e-5 per tensor for both lr adjustments, Nesterov or not,
//    q, k, v as three or one; bf16 Newton–Schulz no further from fp32 than PyTorch's bf16 iteration
//  - the Newton–Schulz result is nearly orthogonal (its singular values in ~[0.7, 1.2])
//  - ZeRO-1's partition holds every matrix whole and is near the even split
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <vector>

#include "backend/cpu/context.h"
#include "common/host_backend.h"
#include "common/test_util.h"
#include "core/rng.h"
#include "dist/communicator.h"
#include "io/safetensors.h"
#include "model/bert.h"
#include "model/gpt2.h"
#include "optim/grad_norm.h"
#include "optim/muon.h"

namespace mptrain {
namespace {

using testing::relative_error;

std::vector<std::string> names(const std::vector<MuonMatrix>& ms) {
  std::vector<std::string> out;
  for (const auto& m : ms) out.push_back(m.name);
  return out;
}

TEST(MuonMatrices, Gpt2HiddenMatricesWithQkvAsThreeOrOne) {
  const ParamTable t = gpt2_param_table(gpt2_preset("d2", 128));
  const auto three = muon_matrices(t, MuonQkv::Three);
  ASSERT_EQ(three.size(), 12u);  // per block: q, k, v, attn.c_proj, c_fc, mlp.c_proj
  EXPECT_EQ(three[0].name, "h.0.attn.c_attn.weight[q]");
  EXPECT_EQ(three[2].name, "h.0.attn.c_attn.weight[v]");
  const ParamSpec& c_attn = t.get("h.0.attn.c_attn.weight");  // Conv1D [C, 3C]
  const int64_t C = c_attn.shape[0];
  EXPECT_EQ(three[1].offset, c_attn.offset + static_cast<size_t>(C));  // k: the middle column block
  EXPECT_EQ(three[1].rows, C);
  EXPECT_EQ(three[1].cols, C);
  EXPECT_EQ(three[1].ld, 3 * C);
  const auto& fc = three[4];
  EXPECT_EQ(fc.name, "h.0.mlp.c_fc.weight");
  EXPECT_EQ(fc.fan_out, 4 * C);  // Conv1D: out is the second dimension
  EXPECT_EQ(fc.fan_in, C);
  EXPECT_FLOAT_EQ(muon_lr_scale(fc, MuonLrAdjust::Original), 2.0f);
  EXPECT_FLOAT_EQ(muon_lr_scale(three[5], MuonLrAdjust::Original), 1.0f);  // mlp.c_proj: out < in
  EXPECT_FLOAT_EQ(muon_lr_scale(fc, MuonLrAdjust::MatchRmsAdamW), 0.2f * std::sqrt(4.0f * C));
  const auto one = muon_matrices(t, MuonQkv::One);
  ASSERT_EQ(one.size(), 8u);
  EXPECT_EQ(one[0].name, "h.0.attn.c_attn.weight");
  EXPECT_EQ(one[0].cols, 3 * C);
  for (const auto& n : names(one))
    EXPECT_TRUE(n.find("wte") == std::string::npos && n.find("ln_") == std::string::npos);
  // ZeRO-1's whole ranges: one per tensor (c_attn's three parts share one).
  EXPECT_EQ(muon_whole_ranges(t, MuonQkv::Three).size(), 8u);
}

TEST(MuonMatrices, BertHiddenMatricesLeaveEmbeddingsAndTheNspHeadToAdamW) {
  BertConfig c = bert_preset("bert-tiny");
  const ParamTable t = bert_param_table(c);
  const auto three = names(muon_matrices(t, MuonQkv::Three));
  const auto one = muon_matrices(t, MuonQkv::One);
  // Per layer q, k, v, attention.output, intermediate, output; then pooler and the MLM transform.
  EXPECT_EQ(three.size(), static_cast<size_t>(6 * c.n_layer + 2));
  EXPECT_EQ(one.size(), static_cast<size_t>(4 * c.n_layer + 2));
  EXPECT_NE(std::find(three.begin(), three.end(), "bert.pooler.dense.weight"), three.end());
  EXPECT_NE(std::find(three.begin(), three.end(), "cls.predictions.transform.dense.weight"), three.end());
  for (const auto& n : three)
    EXPECT_TRUE(n.find("embeddings") == std::string::npos && n.find("seq_relationship") == std::string::npos)
        << n;
  EXPECT_EQ(one[0].name, "bert.encoder.layer.0.attention.self.query.weight");
  EXPECT_EQ(one[0].rows, 3 * c.hidden);  // q, k, v stacked: nn.Linear [3C, C]
  EXPECT_EQ(one[0].fan_out, 3 * c.hidden);
  EXPECT_EQ(muon_whole_ranges(t, MuonQkv::One).front().size(), static_cast<size_t>(3 * c.hidden * c.hidden));
}

TEST(MuonPartition, CutsOnlyBetweenWholeMatricesNearTheEvenSplit) {
  const ParamTable t = gpt2_param_table(gpt2_preset("d2", 128));
  std::vector<std::pair<size_t, size_t>> whole;
  for (const ParamRange& r : muon_whole_ranges(t, MuonQkv::One)) whole.emplace_back(r.begin, r.end);
  for (int world : {2, 3, 4}) {
    const Partition even(t.total(), world), p = partition_keeping_whole(t.total(), world, whole);
    ASSERT_EQ(p.total(), t.total());
    for (int r = 1; r < world; ++r) {
      for (const auto& [lo, hi] : whole) EXPECT_FALSE(lo < p.begin(r) && p.begin(r) < hi) << "rank " << r;
      size_t largest = 0;
      for (const auto& [lo, hi] : whole) largest = std::max(largest, hi - lo);
      const size_t moved =
          p.begin(r) > even.begin(r) ? p.begin(r) - even.begin(r) : even.begin(r) - p.begin(r);
      EXPECT_LE(moved, largest / 2 + 1);
    }
  }
  EXPECT_THROW(Partition(std::vector<size_t>{0, 5, 3}), Error);
}

// NS5 of a random wide and a random tall matrix on the CPU backend: U·Σ'·Vᵀ with every singular
// value pushed into ~[0.7, 1.2], so X·Xᵀ (the smaller Gram matrix) has its eigenvalues there:
// checked through its diagonal and through ‖X·Xᵀ − I‖ relative to the size.
TEST(MuonNewtonSchulz, ResultIsNearlyOrthogonalInFp32AndBf16) {
  Backend& be = host_backend();
  for (ComputeType math : {ComputeType::F32, ComputeType::BF16})
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{48, 160}, {160, 48}}) {
      SCOPED_TRACE(std::string(compute_name(math)) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      ParamTable t;
      t.add_matrix("w", {rows, cols}, InitRule::Normal, MatrixLayout::OutIn);
      MuonHyper h;
      h.ns_math = math;
      h.nesterov = false;
      h.momentum = 0.0f;  // the update is NS5 of the gradient itself
      h.adjust = MuonLrAdjust::Original;
      AdamWHyper a;
      a.weight_decay = 0.0f;
      Muon muon(t, h, a, be);
      std::vector<float> w(t.total(), 0.0f), g(t.total());
      // Full rank, like a gradient (a smooth pattern would be nearly rank-deficient, and NS5 does
      // not lift singular values near 0 in five steps).
      for (size_t i = 0; i < g.size(); ++i) g[i] = (static_cast<float>(uniform01(3, 1, i)) - 0.5f) * 1e-3f;
      const float lr = 1.0f / muon_lr_scale(muon.matrices()[0], MuonLrAdjust::Original);
      muon.step(w.data(), g.data(), lr, 1);  // w = −O
      const int64_t k = std::min(rows, cols);
      double off = 0.0;
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < k; ++j) {
          double dot = 0.0;
          for (int64_t l = 0; l < std::max(rows, cols); ++l) {
            const size_t a_i = rows <= cols ? i * cols + l : l * cols + i,
                         a_j = rows <= cols ? j * cols + l : l * cols + j;
            dot += static_cast<double>(w[a_i]) * w[a_j];
          }
          if (i == j) {
            EXPECT_GT(dot, 0.45) << i;  // σ² in [0.7², 1.2²] up to the quintic's spread
            EXPECT_LT(dot, 1.5) << i;
          } else {
            off += dot * dot;
          }
        }
      EXPECT_LT(std::sqrt(off) / static_cast<double>(k), 0.05);
    }
}

std::string str(double x) {
  std::ostringstream o;
  o.precision(9);
  o << x;
  return o.str();
}

struct RefCase {
  MuonQkv qkv;
  MuonLrAdjust adjust;
  bool nesterov;
  ComputeType ns;
};

// Five steps of a real model's gradients (its parameters change between steps) through Muon, and
// the same gradients through tests/ref/muon_reference.py.
void check_against_pytorch(const RefCase& rc) {
  SCOPED_TRACE(std::string("qkv ") + muon_qkv_name(rc.qkv) + ", " + muon_adjust_name(rc.adjust) +
               (rc.nesterov ? ", nesterov" : "") + ", ns " + compute_name(rc.ns));
  Gpt2Config cfg;
  cfg.n_layer = 2;
  cfg.n_head = 4;
  cfg.n_embd = 64;
  cfg.vocab_size = 101;
  cfg.padded_vocab_size = pad_vocab(101, 64);
  cfg.block_size = 32;
  const int B = 3, T = 17, N = B * T, steps = 5;
  const float lrs[steps] = {2e-3f, 4e-3f, 4e-3f, 3e-3f, 2e-3f};
  const float clip = 1.0f;
  MuonHyper hyper;
  hyper.qkv = rc.qkv;
  hyper.adjust = rc.adjust;
  hyper.nesterov = rc.nesterov;
  hyper.ns_math = rc.ns;
  hyper.adamw_lr_ratio = 0.5f;
  AdamWHyper adamw;
  adamw.weight_decay = 0.1f;

  cpu::Context ctx;
  Gpt2 model(cfg, cpu_backend(ctx));
  model.init_weights(7);
  model.plan(B, T);
  std::vector<int> inputs(static_cast<size_t>(steps) * N), targets(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i] = static_cast<int>((i * 37 + 11 + i / 13) % cfg.vocab_size);
    targets[i] = static_cast<int>((i * 53 + 7 + i / 7) % cfg.vocab_size);
  }
  SafetensorsWriter in;
  for (const auto& spec : model.table().specs())
    in.add_copy(spec.name, DType::F32, spec.hf_shape, model.params().data() + spec.offset);
  in.add("lrs", DType::F32, {steps}, lrs);
  Muon opt(model.table(), hyper, adamw, model.backend());
  std::vector<std::vector<float>> recorded;
  recorded.reserve(steps);
  for (int s = 0; s < steps; ++s) {
    model.zero_grad();
    model.forward_backward(inputs.data() + static_cast<size_t>(s) * N,
                           targets.data() + static_cast<size_t>(s) * N, B, T, 1.0f);
    recorded.emplace_back(model.grads().data(), model.grads().data() + model.num_params());
    for (const auto& spec : model.table().specs())
      in.add("grad." + std::to_string(s) + "." + spec.name, DType::F32, spec.hf_shape,
             recorded.back().data() + spec.offset);
    const double norm = std::sqrt(model.backend().sum_squares(
        View::f32(model.grads().data(), {static_cast<int64_t>(model.num_params())})));
    opt.step(model.params().data(), model.grads().data(), lrs[s], s + 1, clip_coefficient(norm, clip));
  }
  const std::map<std::string, std::string> meta = {{"steps", std::to_string(steps)},
                                                   {"momentum", str(hyper.momentum)},
                                                   {"nesterov", hyper.nesterov ? "1" : "0"},
                                                   {"ns_steps", std::to_string(hyper.ns_steps)},
                                                   {"adjust", muon_adjust_name(hyper.adjust)},
                                                   {"qkv", muon_qkv_name(hyper.qkv)},
                                                   {"weight_decay", str(adamw.weight_decay)},
                                                   {"beta1", str(adamw.beta1)},
                                                   {"beta2", str(adamw.beta2)},
                                                   {"eps", str(adamw.eps)},
                                                   {"adamw_lr_ratio", str(hyper.adamw_lr_ratio)},
                                                   {"grad_clip", str(clip)}};
  for (const auto& [key, value] : meta) in.set_metadata(key, value);
  testing::TempDir tmp;
  // The reference's final parameters with its Newton–Schulz iteration in `dtype`.
  const auto reference = [&](const std::string& dtype) {
    in.set_metadata("ns_dtype", dtype);
    in.write(tmp / "in.safetensors");
    const auto run =
        testing::run_command("/usr/bin/python3 " + testing::source_dir() + "/tests/ref/muon_reference.py " +
                             (tmp / "in.safetensors") + " " + (tmp / "out.safetensors"));
    EXPECT_EQ(run.exit_code, 0) << run.output;
    SafetensorsFile ref(tmp / "out.safetensors");
    std::map<std::string, std::vector<float>> out;
    for (const auto& spec : model.table().specs()) {
      std::vector<float>& p = out[spec.name];
      p.resize(spec.hf_numel());
      ref.read_f32("final." + spec.name, spec.hf_shape, p.data());
    }
    return out;
  };
  const auto fp32 = reference("fp32");
  if (rc.ns == ComputeType::F32) {
    double worst = 0.0;
    for (const auto& spec : model.table().specs()) {
      const double err =
          relative_error(model.params().data() + spec.offset, fp32.at(spec.name).data(), spec.hf_numel());
      EXPECT_LT(err, 1e-5) << spec.name;
      worst = std::max(worst, err);
    }
    std::printf("worst relative error per tensor after %d steps: %.3g\n", steps, worst);
    return;
  }
  // bf16: both iterations are off the fp32 one by bf16's rounding; mptrain's (fp32 sums, one
  // rounding per product) must be no further off than PyTorch's (every product and sum rounded).
  const auto bf16 = reference("bf16");
  double ours = 0.0, theirs = 0.0;
  for (const auto& spec : model.table().specs()) {
    if (spec.matrix == MatrixLayout::None) continue;
    const double a =
        relative_error(model.params().data() + spec.offset, fp32.at(spec.name).data(), spec.hf_numel());
    const double b = relative_error(bf16.at(spec.name).data(), fp32.at(spec.name).data(), spec.hf_numel());
    EXPECT_LT(a, 1.25 * b + 1e-4) << spec.name
                                  << ": mptrain's bf16 iteration is further off fp32 than PyTorch's";
    ours = std::max(ours, a);
    theirs = std::max(theirs, b);
  }
  EXPECT_GT(ours, 1e-5) << "the bf16 iteration gave fp32's result: did it run in bf16?";
  std::printf(
      "worst relative error of a matrix after %d steps, bf16 Newton-Schulz against fp32: mptrain %.3g, "
      "PyTorch %.3g\n",
      steps, ours, theirs);
}

TEST(MuonReference, FiveStepsMatchPyTorchInFp32) {
  if (!testing::have_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch and numpy is not installed";
  check_against_pytorch({MuonQkv::Three, MuonLrAdjust::MatchRmsAdamW, true, ComputeType::F32});
  check_against_pytorch({MuonQkv::One, MuonLrAdjust::Original, false, ComputeType::F32});
}

TEST(MuonReference, Bf16NewtonSchulzIsAsCloseToFp32AsPyTorchsBf16Iteration) {
  if (!testing::have_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch and numpy is not installed";
  check_against_pytorch({MuonQkv::Three, MuonLrAdjust::MatchRmsAdamW, true, ComputeType::BF16});
}

}  // namespace
}  // namespace mptrain
