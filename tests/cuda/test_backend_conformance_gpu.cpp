// Op conformance (ggml's test-backend-ops is the model): every op of the interface, for every
// dtype combination the CUDA backend's supports() accepts, on the CUDA backend against the CPU
// backend, from the same inputs (rounded to each tensor's storage type). Each op is reached
// through the public Backend entry points, as the models reach it. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/device.h"
#include "gpu_test_util.h"

namespace mptrain {
namespace {

using gputest::rel_err;
constexpr StorageType F32 = StorageType::F32, BF16 = StorageType::BF16, F16 = StorageType::F16;
constexpr StorageType kTypes[] = {F32, BF16, F16};

float to_f(const void* p, StorageType t) {
  if (t == F32) return *static_cast<const float*>(p);
  const uint16_t bits = *static_cast<const uint16_t*>(p);
  return t == BF16 ? bf16_to_f32(Bf16{bits}) : f16_to_f32(Fp16{bits});
}
void from_f(float x, void* p, StorageType t) {
  if (t == F32) {
    *static_cast<float*>(p) = x;
  } else {
    const uint16_t bits = t == BF16 ? f32_to_bf16(x).bits : f32_to_f16(x).bits;
    std::memcpy(p, &bits, 2);
  }
}

// One tensor on both backends: contiguous, `type`, the same values in each backend's memory.
class Twin {
 public:
  Twin(Backend& cpu, Backend& gpu, StorageType type, std::vector<std::int64_t> dims,
       const std::vector<float>& values)
      : type_(type), dims_(std::move(dims)), cpu_(&cpu), gpu_(&gpu) {
    n_ = 1;
    for (const std::int64_t d : dims_) n_ *= static_cast<size_t>(d);
    const size_t floats = (n_ * storage_bytes(type) + 3) / 4;
    c_.resize(floats, cpu.memory());
    g_.resize(floats, gpu.memory());
    std::vector<unsigned char> bytes(floats * 4);
    for (size_t i = 0; i < n_; ++i)
      from_f(i < values.size() ? values[i] : 0.0f, &bytes[i * storage_bytes(type)], type);
    cpu.upload(View::of(c_.data(), F32, {static_cast<std::int64_t>(floats)}), bytes.data());
    gpu.upload(View::of(g_.data(), F32, {static_cast<std::int64_t>(floats)}), bytes.data());
  }
  View cpu() const { return shaped(c_.data()); }
  View gpu() const { return shaped(g_.data()); }
  View on(bool gpu_side) const { return gpu_side ? gpu() : cpu(); }
  std::vector<float> read(bool on_gpu) const {
    std::vector<unsigned char> bytes(n_ * storage_bytes(type_));
    Backend& be = on_gpu ? *gpu_ : *cpu_;
    be.download(bytes.data(), on_gpu ? gpu() : cpu());
    std::vector<float> v(n_);
    for (size_t i = 0; i < n_; ++i) v[i] = to_f(&bytes[i * storage_bytes(type_)], type_);
    return v;
  }

 private:
  View shaped(const float* p) const {
    View v = View::of(p, type_, {1});
    v.rank = static_cast<int>(dims_.size());
    std::int64_t stride = 1;
    for (int i = v.rank - 1; i >= 0; --i) {
      v.shape[static_cast<size_t>(i)] = dims_[static_cast<size_t>(i)];
      v.stride[static_cast<size_t>(i)] = stride;
      stride *= dims_[static_cast<size_t>(i)];
    }
    return v;
  }
  StorageType type_;
  std::vector<std::int64_t> dims_;
  Backend *cpu_, *gpu_;
  size_t n_ = 0;
  FloatBuffer c_, g_;
};

// Index tensors on both backends.
struct Ids {
  IndexBuffer c, g;
  Ids(Backend& cpu, Backend& gpu, const std::vector<int>& v)
      : c(v.size(), cpu.memory()), g(v.size(), gpu.memory()) {
    c.upload(v.data(), v.size());
    g.upload(v.data(), v.size());
  }
  const int* on(bool gpu) const { return gpu ? g.data() : c.data(); }
};

ComputeType math_of(StorageType t) {
  return t == BF16 ? ComputeType::BF16 : t == F16 ? ComputeType::F16 : ComputeType::F32;
}
double tol(StorageType t, ComputeType m = ComputeType::F32) {
  return t != F32 ? 2e-2 : m == ComputeType::TF32 ? 2e-3 : 1e-5;
}

class Conformance : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    gpu_ = make_cuda_backend(0);
  }
  Twin rand(StorageType t, std::vector<std::int64_t> dims, uint64_t seed, float scale = 1.0f) {
    size_t n = 1;
    for (const std::int64_t d : dims) n *= static_cast<size_t>(d);
    return Twin(cpu_, *gpu_, t, std::move(dims), gputest::randn(n, seed, scale));
  }
  Twin zeros(StorageType t, std::vector<std::int64_t> dims) {
    return Twin(cpu_, *gpu_, t, std::move(dims), {});
  }
  // Runs f on the CPU backend (false) and the CUDA backend (true).
  template <class F>
  void both(F f) {
    f(static_cast<Backend&>(cpu_), false);
    f(*gpu_, true);
  }
  void expect_close(const Twin& t, double tolerance, const std::string& what) {
    const double e = rel_err(t.read(true), t.read(false));
    EXPECT_LT(e, tolerance) << what;
  }
  bool gpu_runs(Op op, std::initializer_list<StorageType> types, ComputeType m = ComputeType::F32) {
    return gpu_->supports(op, types, m);
  }
  cpu::CpuBackend cpu_{gputest::cpu_ctx()};
  std::unique_ptr<Backend> gpu_;
};

TEST_F(Conformance, CastsAccumulateAndOperands) {
  int tested = 0;
  for (const StorageType d : kTypes)
    for (const StorageType s : kTypes) {
      const std::string what = std::string(storage_name(d)) + " <- " + storage_name(s);
      if (gpu_runs(Op::Cast, {d, s})) {
        Twin src = rand(s, {1000}, 1), dst = zeros(d, {1000});
        both([&](Backend& be, bool g) { be.cast(dst.on(g), src.on(g)); });
        expect_close(dst, 1e-7, "cast " + what);
        ++tested;
      }
      if (gpu_runs(Op::Accumulate, {d, s})) {
        Twin src = rand(s, {1000}, 2), dst = rand(d, {1000}, 3);
        both([&](Backend& be, bool g) { be.accumulate(dst.on(g), src.on(g)); });
        expect_close(dst, tol(d), "accumulate " + what);
        ++tested;
      }
    }
  for (const ComputeType m : {ComputeType::F32, ComputeType::TF32, ComputeType::BF16, ComputeType::F16}) {
    const StorageType o = gpu_->operand_storage(m);
    if (cpu_.operand_storage(m) != o || !gpu_runs(Op::ToOperand, {o, F32}, m)) continue;
    Twin src = rand(F32, {1000}, 4), dst = zeros(o, {1000});
    both([&](Backend& be, bool g) { be.to_operand(dst.on(g), src.on(g), m); });
    expect_close(dst, tol(o, m), "to_operand");
    ++tested;
  }
  EXPECT_GE(tested, 8);
}

// Every epilogue, both weight layouts, in each type the GPU serves (and TF32), forward and
// backward (dx written and accumulated, dw into fp32 masters and into the operands' type).
TEST_F(Conformance, LinearForwardAndBackward) {
  const int N = 48, K = 64, M = 96;
  int tested = 0;
  for (const StorageType t : kTypes)
    for (const ComputeType m : {math_of(t), ComputeType::TF32}) {
      if (m == ComputeType::TF32 && t != F32) continue;
      for (const Epilogue e : {Epilogue::Bias, Epilogue::BiasGelu, Epilogue::BiasGeluErf, Epilogue::BiasTanh,
                               Epilogue::BiasResidual})
        for (const bool nn_linear : {false, true}) {
          const std::string what = std::string(storage_name(t)) + (m == ComputeType::TF32 ? " tf32" : "") +
                                   " epilogue " + std::to_string(static_cast<int>(e)) +
                                   (nn_linear ? " [M,K] weight" : " [K,M] weight");
          const Op op = e == Epilogue::BiasResidual ? Op::LinearResidual
                        : has_activation(e)         ? Op::LinearActivation
                                                    : Op::Linear;
          std::initializer_list<StorageType> fwd_types = {t, t, t, t};
          if (!gpu_runs(op, fwd_types, m) || !cpu_.supports(op, fwd_types, m)) continue;
          Twin x = rand(t, {N, K}, 10, 0.5f),
               w = rand(t, nn_linear ? std::vector<std::int64_t>{M, K} : std::vector<std::int64_t>{K, M}, 11,
                        0.1f);
          Twin bias = rand(t, {M}, 12, 0.1f), out = zeros(t, {N, M}), pre = zeros(t, {N, M});
          Twin residual = rand(t, {N, M}, 13);
          const auto wv = [&](bool g) { return nn_linear ? w.on(g).t() : w.on(g); };
          both([&](Backend& be, bool g) {
            LinearArgs a;
            a.out = out.on(g);
            a.x = x.on(g);
            a.w = wv(g);
            a.bias = bias.on(g);
            a.math = m;
            a.epilogue = e;
            if (keeps_pre(e)) a.pre = pre.on(g);
            if (e == Epilogue::BiasResidual) {
              a.residual = residual.on(g);
              a.rounding = t;
            }
            be.linear(a);
          });
          expect_close(out, tol(t, m), "linear " + what);
          if (keeps_pre(e)) expect_close(pre, tol(t, m), "linear pre " + what);
          ++tested;
          if (e == Epilogue::BiasResidual) continue;  // its backward is the caller's
          for (const StorageType gt : {F32, t}) {
            const Op bop = has_activation(e) ? Op::LinearActivationBackward : Op::LinearBackward;
            if (!gpu_runs(bop, {t, gt, t, t, t, t}, m) || !cpu_.supports(bop, {t, gt, t, t, t, t}, m))
              continue;
            Twin dy = rand(t, {N, M}, 14, 0.5f), dx = rand(t, {N, K}, 15);
            Twin dw =
                rand(gt, nn_linear ? std::vector<std::int64_t>{M, K} : std::vector<std::int64_t>{K, M}, 16);
            Twin db = rand(gt, {M}, 17);
            const Twin& saved = e == Epilogue::BiasTanh ? out : pre;
            both([&](Backend& be, bool g) {
              LinearBackwardArgs a;
              a.dx = dx.on(g);
              a.dw = nn_linear ? dw.on(g).t() : dw.on(g);
              a.db = db.on(g);
              a.dy = dy.on(g);
              a.x = x.on(g);
              a.w = wv(g);
              a.math = m;
              a.epilogue = e;
              if (has_activation(e)) a.pre = saved.on(g);
              a.dx_accumulate = gt == F32;  // both the (=) and the (+=) form
              be.linear_backward(a);
            });
            expect_close(dx, tol(t, m), "linear_backward dx " + what);
            expect_close(dw, tol(t, m), "linear_backward dw " + what);
            expect_close(db, tol(t, m), "linear_backward db " + what);
            ++tested;
          }
        }
    }
  EXPECT_GE(tested, 20);
}

TEST_F(Conformance, LayerNormFusedAndItsBackward) {
  const int N = 40, C = 96;
  int tested = 0;
  for (const StorageType t : kTypes) {
    if (!gpu_runs(Op::LayerNorm, {t, t, t}) || !cpu_.supports(Op::LayerNorm, {t, t, t})) continue;
    for (const bool fused : {false, true}) {
      if (fused && !gpu_runs(Op::ResidualLayerNorm, {t, t, t, t, t})) continue;
      Twin x = rand(t, {N, C}, 20), add = rand(t, {N, C}, 21), gamma = rand(t, {C}, 22),
           beta = rand(t, {C}, 23);
      Twin out = zeros(t, {N, C}), rsum = zeros(t, {N, C}), mean = zeros(F32, {N}), rstd = zeros(F32, {N});
      both([&](Backend& be, bool g) {
        LayerNormArgs a;
        a.out = out.on(g);
        a.mean = mean.on(g);
        a.rstd = rstd.on(g);
        a.x = x.on(g);
        a.gamma = gamma.on(g);
        a.beta = beta.on(g);
        if (fused) {
          a.add = add.on(g);
          a.residual_out = rsum.on(g);
        }
        be.layernorm(a);
      });
      const std::string what = std::string(storage_name(t)) + (fused ? " with the residual add" : "");
      expect_close(out, tol(t), "layernorm " + what);
      expect_close(mean, tol(t), "layernorm mean " + what);
      expect_close(rstd, tol(t), "layernorm rstd " + what);
      if (fused) expect_close(rsum, tol(t), "layernorm residual_out " + what);
      Twin dout = rand(t, {N, C}, 24), dx = rand(t, {N, C}, 25), dg = rand(t, {C}, 26),
           dbeta = rand(t, {C}, 27);
      const Twin& normed = fused ? rsum : x;
      both([&](Backend& be, bool g) {
        be.layernorm_backward({.dx = dx.on(g),
                               .dgamma = dg.on(g),
                               .dbeta = dbeta.on(g),
                               .dout = dout.on(g),
                               .x = normed.on(g),
                               .gamma = gamma.on(g),
                               .mean = mean.on(g),
                               .rstd = rstd.on(g)});
      });
      expect_close(dx, tol(t), "layernorm_backward dx " + what);
      expect_close(dg, tol(t), "layernorm_backward dgamma " + what);
      expect_close(dbeta, tol(t), "layernorm_backward dbeta " + what);
      ++tested;
    }
  }
  EXPECT_GE(tested, 3);
}

// Causal and key-masked, at a head size the flash kernels take (64) and one they do not (16).
TEST_F(Conformance, AttentionForwardAndBackward) {
  const int B = 2, T = 40;
  int tested = 0;
  for (const StorageType t : kTypes)
    for (const int NH : {2, 4}) {
      const int C = NH == 2 ? 128 : 64;
      const AttentionDtypes types{t, t, t, math_of(t), math_of(t)};
      if (!gpu_runs(Op::Attention, {t, t, t}, math_of(t)) ||
          !cpu_.supports(Op::Attention, {t, t, t}, math_of(t)))
        continue;
      for (const bool causal : {true, false}) {
        std::vector<int> mask(static_cast<size_t>(B) * T, 1);
        for (int j = T - 7; j < T; ++j) mask[static_cast<size_t>(T + j)] = 0;  // the second sequence padded
        const Ids key_mask(cpu_, *gpu_, mask);
        Twin qkv = rand(t, {B * T, 3 * C}, 30), out = zeros(t, {B * T, C});
        Twin dout = rand(t, {B * T, C}, 31), dqkv = zeros(t, {B * T, 3 * C});
        const AttentionBytes cb = cpu_.attention_bytes(B, T, C, NH, types),
                             gb = gpu_->attention_bytes(B, T, C, NH, types);
        const auto bytes = [](size_t b) { return static_cast<std::int64_t>((b + 3) / 4 + 1); };
        FloatBuffer cs(static_cast<size_t>(bytes(cb.saved)), cpu_.memory()),
            cw(static_cast<size_t>(bytes(cb.scratch)), cpu_.memory());
        FloatBuffer gs(static_cast<size_t>(bytes(gb.saved)), gpu_->memory()),
            gw(static_cast<size_t>(bytes(gb.scratch)), gpu_->memory());
        both([&](Backend& be, bool g) {
          const View saved =
              g ? View::f32(gs.data(), {bytes(gb.saved)}) : View::f32(cs.data(), {bytes(cb.saved)});
          const View scratch =
              g ? View::f32(gw.data(), {bytes(gb.scratch)}) : View::f32(cw.data(), {bytes(cb.scratch)});
          be.attention({.out = out.on(g),
                        .qkv = qkv.on(g),
                        .saved = saved,
                        .scratch = scratch,
                        .B = B,
                        .T = T,
                        .NH = NH,
                        .types = types,
                        .causal = causal,
                        .key_mask = causal ? nullptr : key_mask.on(g)});
          be.attention_backward({.dqkv = dqkv.on(g),
                                 .dout = dout.on(g),
                                 .out = out.on(g),
                                 .qkv = qkv.on(g),
                                 .saved = saved,
                                 .scratch = scratch,
                                 .B = B,
                                 .T = T,
                                 .NH = NH,
                                 .types = types,
                                 .causal = causal});
        });
        const std::string what =
            std::string(storage_name(t)) + " NH=" + std::to_string(NH) + (causal ? " causal" : " masked");
        expect_close(out, tol(t), "attention " + what);
        expect_close(dqkv, tol(t), "attention_backward " + what);
        ++tested;
      }
    }
  EXPECT_GE(tested, 6);
}

TEST_F(Conformance, FusedLossOnTargetsAndOnDrawnLabels) {
  const int N = 24, V = 101, Vp = 128;
  int tested = 0;
  for (const StorageType t : kTypes) {
    if (!gpu_runs(Op::CrossEntropy, {t, t}) || !cpu_.supports(Op::CrossEntropy, {t, t})) continue;
    std::vector<int> targets(N);
    for (int i = 0; i < N; ++i) targets[static_cast<size_t>(i)] = i % 5 == 3 ? -1 : (i * 37) % V;
    const Ids tg(cpu_, *gpu_, targets);
    for (const bool sampled : {false, true}) {
      Twin logits = rand(t, {N, Vp}, 40, 2.0f), losses = zeros(F32, {N});
      Twin dloss = Twin(cpu_, *gpu_, F32, {N}, std::vector<float>(N, 1.0f / N));
      const Ids drawn(cpu_, *gpu_, std::vector<int>(N, 0));
      both([&](Backend& be, bool g) {
        CrossEntropyArgs a;
        a.losses = losses.on(g);
        a.logits = logits.on(g);
        a.dlogits = a.logits;  // in place, as the models run it
        a.dloss = dloss.on(g);
        a.vocab = V;
        if (sampled) {
          a.sampled = const_cast<int*>(drawn.on(g));
          a.seed = 5;
          a.counter = 2;
        } else {
          a.targets = tg.on(g);
        }
        be.cross_entropy(a);
      });
      const std::string what = std::string(storage_name(t)) + (sampled ? " drawn labels" : " targets");
      if (sampled) {
        std::vector<int> c(N), g(N);
        drawn.c.download(c.data(), N);
        drawn.g.download(g.data(), N);
        int same = 0;
        for (int i = 0; i < N; ++i) same += c[static_cast<size_t>(i)] == g[static_cast<size_t>(i)];
        EXPECT_GE(same, N - 1) << "drawn labels " << what;  // a label may differ at a CDF boundary
        if (same < N) continue;
      }
      expect_close(losses, tol(t), "cross_entropy losses " + what);
      expect_close(logits, tol(t), "cross_entropy dlogits " + what);
      ++tested;
    }
  }
  EXPECT_GE(tested, 3);
}

TEST_F(Conformance, EmbeddingsAndRows) {
  const int B = 2, T = 9, C = 32, V = 40, R = 5;
  std::vector<int> tokens(B * T), types(B * T);
  for (int i = 0; i < B * T; ++i)
    tokens[static_cast<size_t>(i)] = (i * 7) % V, types[static_cast<size_t>(i)] = i % T > 4;
  tokens[3] = 0;  // the pad token, which takes no gradient
  const Ids tok(cpu_, *gpu_, tokens), typ(cpu_, *gpu_, types), rows(cpu_, *gpu_, {4, 0, 17, 9});
  int tested = 0;
  for (const StorageType t : kTypes) {
    if (!gpu_runs(Op::Embedding, {t, t}) || !cpu_.supports(Op::Embedding, {t, t})) continue;
    for (const bool bert : {false, true}) {
      Twin word = rand(t, {V, C}, 50), pos = rand(t, {T, C}, 51), type = rand(t, {2, C}, 52),
           out = zeros(t, {B * T, C});
      Twin dword = rand(t, {V, C}, 53), dpos = rand(t, {T, C}, 54), dtype = rand(t, {2, C}, 55),
           dout = rand(t, {B * T, C}, 56);
      both([&](Backend& be, bool g) {
        be.embedding({.out = out.on(g),
                      .tokens = tok.on(g),
                      .B = B,
                      .T = T,
                      .word = word.on(g),
                      .pos = pos.on(g),
                      .types = bert ? typ.on(g) : nullptr,
                      .type_table = bert ? type.on(g) : View{}});
        be.embedding_backward({.dword = dword.on(g),
                               .dpos = dpos.on(g),
                               .dtype = bert ? dtype.on(g) : View{},
                               .dout = dout.on(g),
                               .tokens = tok.on(g),
                               .types = bert ? typ.on(g) : nullptr,
                               .B = B,
                               .T = T,
                               .pad_token = bert ? 0 : -1});
      });
      const std::string what = std::string(storage_name(t)) + (bert ? " BERT" : " GPT-2");
      expect_close(out, tol(t), "embedding " + what);
      expect_close(dword, tol(t), "embedding_backward dword " + what);
      expect_close(dpos, tol(t), "embedding_backward dpos " + what);
      if (bert) expect_close(dtype, tol(t), "embedding_backward dtype " + what);
      ++tested;
    }
    if (!gpu_runs(Op::GatherRows, {t, t})) continue;
    Twin big = rand(t, {B * T, C}, 60), small = zeros(t, {R, C}), back = rand(t, {B * T, C}, 61);
    std::vector<int> best_c(R), best_g(R);
    const Ids best(cpu_, *gpu_, std::vector<int>(R, -1));
    both([&](Backend& be, bool g) {
      be.gather_rows(small.on(g), big.on(g), rows.on(g), 4);
      be.scatter_add_rows(back.on(g), small.on(g), rows.on(g), 4);
      be.argmax_rows(const_cast<int*>(best.on(g)), big.on(g), C - 3, R);
    });
    expect_close(small, 1e-7, std::string("gather_rows ") + storage_name(t));
    expect_close(back, tol(t), std::string("scatter_add_rows ") + storage_name(t));
    best.c.download(best_c.data(), R);
    best.g.download(best_g.data(), R);
    EXPECT_EQ(best_g, best_c) << "argmax_rows " << storage_name(t);
    ++tested;
  }
  EXPECT_GE(tested, 9);
}

TEST_F(Conformance, OptimizerOps) {
  const int n = 1000;
  std::vector<float> second = gputest::randn(n, 74, 0.01f);  // v and h are not negative
  for (float& x : second) x = std::fabs(x);
  Twin p = rand(F32, {n}, 70), g = rand(F32, {n}, 71), m = rand(F32, {n}, 72, 0.1f);
  Twin v(cpu_, *gpu_, F32, {n}, second);
  // Without a decay mask (every element decays), then with one whose ranges start and end inside
  // its words (the optimizers' one launch over a whole table).
  std::vector<std::uint32_t> bits((n + 31) / 32, 0u);
  for (int i = 0; i < n; ++i)
    if ((i >= 7 && i < 300) || (i >= 517 && i < 901)) bits[i >> 5] |= 1u << (i & 31);
  Buffer<std::uint32_t> mask_c(bits.size(), cpu_.memory()), mask_g(bits.size(), gpu_->memory());
  mask_c.upload(bits.data(), bits.size());
  mask_g.upload(bits.data(), bits.size());
  for (const bool masked : {false, true}) {
    const std::string what = masked ? " (decay mask)" : "";
    const auto mask = [&](bool on) -> const std::uint32_t* {
      return !masked ? nullptr : on ? mask_g.data() : mask_c.data();
    };
    both([&](Backend& be, bool on) {
      be.adamw({.params = p.on(on),
                .grads = g.on(on),
                .m = m.on(on),
                .v = v.on(on),
                .lr = 1e-3f,
                .weight_decay = 0.1f,
                .t = 3,
                .grad_scale = 0.5f,
                .decay_mask = mask(on)});
    });
    expect_close(p, 1e-6, "adamw params" + what);
    expect_close(m, 1e-6, "adamw m" + what);
    expect_close(v, 1e-6, "adamw v" + what);
    both([&](Backend& be, bool on) {
      be.sophia({.params = p.on(on),
                 .grads = g.on(on),
                 .m = m.on(on),
                 .h = v.on(on),
                 .lr = 1e-3f,
                 .rho_b = 2.0f,
                 .weight_decay = 0.1f,
                 .grad_scale = 0.25f,
                 .decay_mask = mask(on)});
      be.sophia_hessian(v.on(on), g.on(on), 0.99f);
    });
    expect_close(p, 1e-6, "sophia params" + what);
    expect_close(m, 1e-6, "sophia m" + what);
    expect_close(v, 1e-6, "sophia_hessian h" + what);
  }
  EXPECT_EQ(gpu_->count_unclipped(m.gpu(), v.gpu(), 2.0f), cpu_.count_unclipped(m.cpu(), v.cpu(), 2.0f));
  EXPECT_NEAR(gpu_->sum_squares(g.gpu()), cpu_.sum_squares(g.cpu()), 1e-9 * cpu_.sum_squares(g.cpu()));
  both([&](Backend& be, bool on) { be.scale(g.on(on), 0.75f); });
  expect_close(g, 1e-7, "scale");
  EXPECT_FALSE(gpu_->unscale_and_check(g.gpu(), 1.0f / 1024.0f));
  EXPECT_FALSE(cpu_.unscale_and_check(g.cpu(), 1.0f / 1024.0f));
  expect_close(g, 1e-7, "unscale_and_check");
  const float inf = std::numeric_limits<float>::infinity();
  gpu_->upload(View::f32(g.gpu().as<float>() + 17, {1}), &inf);
  EXPECT_TRUE(gpu_->unscale_and_check(g.gpu(), 1.0f));
}

// What the GPU cannot serve is refused with one line naming the op and the dtypes.
TEST_F(Conformance, AnUnservedCombinationIsRefusedNamingTheOp) {
  Twin x = rand(F32, {4, 8}, 80), out = zeros(BF16, {4, 8}), gamma = rand(F32, {8}, 81),
       beta = rand(F32, {8}, 82);
  Twin mean = zeros(F32, {4}), rstd = zeros(F32, {4});
  gputest::expect_error_contains(
      [&] {
        gpu_->layernorm({.out = out.gpu(),
                         .mean = mean.gpu(),
                         .rstd = rstd.gpu(),
                         .x = x.gpu(),
                         .gamma = gamma.gpu(),
                         .beta = beta.gpu()});
      },
      "[backend cuda] layernorm: no kernel for out=bf16 x=fp32 gamma=fp32");
}

}  // namespace
}  // namespace mptrain
