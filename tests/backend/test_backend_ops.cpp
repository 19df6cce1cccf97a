// The op interface (backend/backend.h) on the CPU backend, op by op: every op in every storage
// and arithmetic, against a float64 reference computed from the values the op actually reads
// (inputs rounded to their storage, GEMM operands to the arithmetic) with the tolerance of the
// output's storage; fp32 work bit for bit equal to today's fp32 kernels; and the refusals, one
// line naming the op and the dtypes. The CPU runs every combination: the 16-bit tensors its
// kernels do not take (a GPU plan's 16-bit bias, residual stream, LayerNorm and embedding
// tensors, logits with dlogits in place, weight gradients) are widened to fp32 copies around the
// fp32 kernel and what it writes (= or +=) is rounded back once (backend/cpu/widening.h), so
// those cases are here too, with exact checks where one fp32 operation and one rounding decide
// the result. The refusal mechanism is checked through a backend that lacks the bf16 kernels.
// The GPU backend will run the same cases against this one.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/ops/gemm.h"
#include "common/conformance.h"
#include "common/cpu_fp32.h"
#include "common/test_util.h"
#include "core/dtype.h"
#include "core/error.h"

namespace mptrain {
namespace {

using testing::expect_error;

using test::all_close;
using test::Tol;
constexpr StorageType F32 = StorageType::F32, BF16 = StorageType::BF16, F16 = StorageType::F16;

// The references' roundings and activations: the conformance test's (tests/common/conformance.h).
using conformance::operand;
using conformance::stored;

// A host tensor in one storage type, made from fp32 values (rounded once).
class Buf {
 public:
  Buf(StorageType t, const std::vector<float>& v)
      : type_(t), n_(v.size()), bytes_(v.size() * storage_bytes(t) + 64) {
    for (size_t i = 0; i < n_; ++i) set(i, v[i]);
  }
  Buf(StorageType t, size_t n, float fill = test::kPoison) : Buf(t, std::vector<float>(n, fill)) {}
  View view(std::initializer_list<std::int64_t> dims) { return View::of(bytes_.data(), type_, dims); }
  float get(size_t i) const {
    switch (type_) {
      case BF16: {
        Bf16 h;
        std::memcpy(&h, bytes_.data() + 2 * i, 2);
        return bf16_to_f32(h);
      }
      case F16: {
        Fp16 h;
        std::memcpy(&h, bytes_.data() + 2 * i, 2);
        return f16_to_f32(h);
      }
      default:
        break;
    }
    float f;
    std::memcpy(&f, bytes_.data() + 4 * i, 4);
    return f;
  }
  std::vector<float> values() const {
    std::vector<float> v(n_);
    for (size_t i = 0; i < n_; ++i) v[i] = get(i);
    return v;
  }

 private:
  void set(size_t i, float f) {
    if (type_ == BF16) {
      const Bf16 h = f32_to_bf16(f);
      std::memcpy(bytes_.data() + 2 * i, &h, 2);
    } else if (type_ == F16) {
      const Fp16 h = f32_to_f16(f);
      std::memcpy(bytes_.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(bytes_.data() + 4 * i, &f, 4);
    }
  }
  StorageType type_;
  size_t n_;
  std::vector<char> bytes_;
};

// An index array as the op interface takes it (a view of the vector's ints; empty for none).
View ints(const std::vector<int>& v) { return View::ints(v.data(), static_cast<std::int64_t>(v.size())); }

// The tolerance of a result stored in t: fp32 sums in another order, then one rounding that
// may fall on the other side.
Tol tol_for(StorageType t) {
  switch (t) {
    case BF16:
      return {1e-2, 8e-3};
    case F16:
      return {1e-3, 1e-3};
    default:
      break;
  }
  return {2e-5, 2e-5};
}

// The wider of two tolerances (a result that went through two roundings, e.g. a bf16 gradient
// accumulated into a 16-bit dW).
Tol looser(Tol a, Tol b) { return {std::max(a.atol, b.atol), std::max(a.rtol, b.rtol)}; }

using conformance::activation_grad;
using conformance::gelu_erf;
using conformance::gelu_tanh;

struct CpuFixture : ::testing::Test {
  cpu::Context ctx;
  cpu::CpuBackend be{ctx};
};

using BackendOps = CpuFixture;

// Element (k, m) of a weight [K, M] stored Conv1D (w[k*M + m]) or nn.Linear (w[m*K + k]).
struct Weight {
  bool transposed;  // nn.Linear's [M, K]
  int K, M;
  size_t at(int k, int m) const {
    return transposed ? static_cast<size_t>(m) * K + k : static_cast<size_t>(k) * M + m;
  }
  View view(Buf& b) const { return transposed ? b.view({M, K}).t() : b.view({K, M}); }
};

const ComputeType kMaths[] = {ComputeType::F32, ComputeType::TF32, ComputeType::BF16, ComputeType::F16};

// The bias in fp32 or in out's 16 bits (a GPU plan's copy of the small weights); the residual
// epilogue's stream in out's storage, also read and written in place (residual == out).
TEST_F(BackendOps, LinearMatchesTheReferenceInEveryStorageArithmeticAndEpilogue) {
  const int N = 6, K = 40, M = 24;
  const std::vector<float> x0 = test::randn(static_cast<size_t>(N) * K, 1),
                           w0 = test::randn(static_cast<size_t>(K) * M, 2, 0.2f);
  const std::vector<float> b0 = test::randn(M, 3, 0.5f), r0 = test::randn(static_cast<size_t>(N) * M, 4);
  for (ComputeType math : kMaths)
    for (StorageType xt : {F32, compute_storage(math)})
      for (bool transposed : {false, true})
        for (Epilogue ep : {Epilogue::Bias, Epilogue::BiasGelu, Epilogue::BiasGeluErf, Epilogue::BiasTanh,
                            Epilogue::BiasResidual})
          for (StorageType ot : {F32, BF16, F16})
            for (StorageType bt : {F32, BF16, F16})
              for (bool alias : {false, true}) {
                if (bt != F32 && bt != ot) continue;
                if (alias && ep != Epilogue::BiasResidual) continue;
                const std::string what = std::string(compute_name(math)) + " x=" + storage_name(xt) +
                                         (transposed ? " nn.Linear" : " Conv1D") +
                                         " out=" + storage_name(ot) + " bias=" + storage_name(bt) +
                                         " epilogue=" + std::to_string(static_cast<int>(ep)) +
                                         (alias ? " residual in place" : "");
                const Weight wl{transposed, K, M};
                std::vector<float> wv(w0.size());
                for (int k = 0; k < K; ++k)
                  for (int m = 0; m < M; ++m) wv[wl.at(k, m)] = w0[static_cast<size_t>(k) * M + m];
                Buf x(xt, x0), w(xt, wv), b(bt, b0), out(ot, static_cast<size_t>(N) * M),
                    pre(BF16, static_cast<size_t>(N) * M);
                Buf res(ot, r0);
                LinearArgs a;
                a.out = alias ? res.view({N, M}) : out.view({N, M});
                a.x = x.view({N, K});
                a.w = wl.view(w);
                a.bias = b.view({M});
                a.math = math;
                a.epilogue = ep;
                if (keeps_pre(ep)) a.pre = pre.view({N, M});
                if (ep == Epilogue::BiasResidual) {
                  a.residual = res.view({N, M});
                  a.rounding = BF16;
                }
                const std::vector<float> rs = res.values();  // the stream as stored, before the op
                be.linear(a);
                std::vector<double> ref(static_cast<size_t>(N) * M), ref_pre(ref.size());
                const std::vector<float> xs = x.values(), ws = w.values(), bs = b.values();
                for (int n = 0; n < N; ++n)
                  for (int m = 0; m < M; ++m) {
                    double s = 0.0;
                    for (int k = 0; k < K; ++k)
                      s += operand(xs[static_cast<size_t>(n) * K + k], math) * operand(ws[wl.at(k, m)], math);
                    const size_t i = static_cast<size_t>(n) * M + m;
                    const double y = s + bs[static_cast<size_t>(m)];
                    ref_pre[i] = stored(static_cast<float>(y), BF16);
                    ref[i] = ep == Epilogue::Bias          ? y
                             : ep == Epilogue::BiasGelu    ? gelu_tanh(ref_pre[i])
                             : ep == Epilogue::BiasGeluErf ? gelu_erf(ref_pre[i])
                             : ep == Epilogue::BiasTanh    ? std::tanh(stored(static_cast<float>(y), ot))
                                                           : rs[i] + stored(static_cast<float>(y), BF16);
                  }
                EXPECT_TRUE(all_close((alias ? res : out).values(), ref, tol_for(ot), what));
                if (keeps_pre(ep)) {
                  EXPECT_TRUE(all_close(pre.values(), ref_pre, tol_for(BF16), what + " pre"));
                }
              }
}

// dy in any storage (also 16-bit through an activation's derivative), and dW, db in fp32 or
// 16 bits (a GPU plan's weight gradients): (+=) onto nonzero values, rounded once.
TEST_F(BackendOps, LinearBackwardMatchesTheReference) {
  const int N = 5, K = 24, M = 16;
  const std::vector<float> x0 = test::randn(static_cast<size_t>(N) * K, 11),
                           w0 = test::randn(static_cast<size_t>(K) * M, 12, 0.2f);
  const std::vector<float> dy0 = test::randn(static_cast<size_t>(N) * M, 13),
                           pre0 = test::randn(static_cast<size_t>(N) * M, 14);
  const std::vector<float> dw0 = test::randn(static_cast<size_t>(K) * M, 15), db0 = test::randn(M, 16);
  for (ComputeType math : kMaths)
    for (bool transposed : {false, true})
      for (Epilogue ep : {Epilogue::Bias, Epilogue::BiasGelu, Epilogue::BiasGeluErf, Epilogue::BiasTanh})
        for (StorageType dyt : {F32, BF16, F16})
          for (StorageType dwt : {F32, BF16, F16}) {
            const StorageType xt = compute_storage(math);
            const std::string what = std::string(compute_name(math)) +
                                     (transposed ? " nn.Linear" : " Conv1D") + " dy=" + storage_name(dyt) +
                                     " dw=" + storage_name(dwt) +
                                     " epilogue=" + std::to_string(static_cast<int>(ep));
            const Weight wl{transposed, K, M};
            std::vector<float> wv(w0.size()), dwv(dw0.size());
            for (int k = 0; k < K; ++k)
              for (int m = 0; m < M; ++m) {
                wv[wl.at(k, m)] = w0[static_cast<size_t>(k) * M + m];
                dwv[wl.at(k, m)] = dw0[static_cast<size_t>(k) * M + m];
              }
            Buf x(xt, x0), w(xt, wv), dy(dyt, dy0), pre(BF16, pre0), dx(F32, static_cast<size_t>(N) * K);
            Buf dw(dwt, dwv), db(dwt, db0);
            const std::vector<float> dw_start = dw.values(), db_start = db.values();
            LinearBackwardArgs a;
            a.dx = dx.view({N, K});
            a.dw = wl.view(dw);
            a.db = db.view({M});
            a.dy = dy.view({N, M});
            a.x = x.view({N, K});
            a.w = wl.view(w);
            a.math = math;
            a.epilogue = ep;
            if (has_activation(ep)) a.pre = pre.view({N, M});
            be.linear_backward(a);
            // The gradient the GEMMs multiply: through GELU, rounded once to the operand storage.
            const std::vector<float> dys = dy.values(), pres = pre.values(), xs = x.values(), ws = w.values();
            std::vector<double> g(dys.size());
            for (size_t i = 0; i < g.size(); ++i)
              g[i] = has_activation(ep)
                         ? stored(static_cast<float>(activation_grad(ep, pres[i]) * dys[i]),
                                  compute_storage(math))
                         : dys[i];
            std::vector<double> rdx(static_cast<size_t>(N) * K), rdw(dw0.size()), rdb(M);
            for (int n = 0; n < N; ++n)
              for (int k = 0; k < K; ++k) {
                double s = 0.0;
                for (int m = 0; m < M; ++m)
                  s += operand(static_cast<float>(g[static_cast<size_t>(n) * M + m]), math) *
                       operand(ws[wl.at(k, m)], math);
                rdx[static_cast<size_t>(n) * K + k] = s;
              }
            for (int k = 0; k < K; ++k)
              for (int m = 0; m < M; ++m) {
                double s = dw_start[wl.at(k, m)];
                for (int n = 0; n < N; ++n)
                  s += operand(xs[static_cast<size_t>(n) * K + k], math) *
                       operand(static_cast<float>(g[static_cast<size_t>(n) * M + m]), math);
                rdw[wl.at(k, m)] = s;
              }
            for (int m = 0; m < M; ++m) {
              double s = db_start[static_cast<size_t>(m)];
              for (int n = 0; n < N; ++n) s += g[static_cast<size_t>(n) * M + m];
              rdb[static_cast<size_t>(m)] = s;
            }
            // GELU's gradient is rounded once; the reference's rounding may land one ulp away. A
            // 16-bit dW, db is rounded once more, on store.
            const Tol t = has_activation(ep) ? tol_for(compute_storage(math)) : tol_for(F32);
            EXPECT_TRUE(all_close(dx.values(), rdx, t, what + " dx"));
            EXPECT_TRUE(all_close(dw.values(), rdw, looser(t, tol_for(dwt)), what + " dw (+=)"));
            EXPECT_TRUE(all_close(db.values(), rdb, looser(t, tol_for(dwt)), what + " db (+=)"));
          }
}

// An all-fp32 plan runs today's fp32 kernels: the same bits as matmul_forward / linear_forward
// and their backward (whose dinp accumulates: here onto zeros).
TEST_F(BackendOps, Fp32LinearIsTodaysKernelBitForBit) {
  const int N = 7, K = 32, M = 48;
  const std::vector<float> x = test::randn(static_cast<size_t>(N) * K, 21),
                           w = test::randn(static_cast<size_t>(K) * M, 22);
  const std::vector<float> b = test::randn(M, 23), dy = test::randn(static_cast<size_t>(N) * M, 24);
  for (bool transposed : {false, true}) {
    std::vector<float> out(static_cast<size_t>(N) * M), want(out.size());
    Buf xb(F32, x), wb(F32, w), bb(F32, b);
    LinearArgs a;
    a.out = View::of(out.data(), F32, {N, M});
    a.x = xb.view({N, K});
    a.w = transposed ? wb.view({M, K}).t() : wb.view({K, M});
    a.bias = bb.view({M});
    be.linear(a);
    if (transposed)
      cpu::linear_forward(want.data(), x.data(), w.data(), b.data(), N, K, M, ctx);
    else
      cpu::matmul_forward(want.data(), x.data(), w.data(), b.data(), N, K, M, ctx);
    EXPECT_TRUE(test::bit_identical(out, want, transposed ? "nn.Linear forward" : "Conv1D forward"));

    std::vector<float> dx(static_cast<size_t>(N) * K), dw(w.size(), 0.5f), db(M, 0.25f);
    std::vector<float> wdx(dx.size(), 0.0f), wdw(dw), wdb(db);
    Buf dyb(F32, dy);
    LinearBackwardArgs g;
    g.dx = View::of(dx.data(), F32, {N, K});
    g.dw = transposed ? View::of(dw.data(), F32, {M, K}).t() : View::of(dw.data(), F32, {K, M});
    g.db = View::of(db.data(), F32, {M});
    g.dy = dyb.view({N, M});
    g.x = a.x;
    g.w = a.w;
    be.linear_backward(g);
    if (transposed)
      cpu::linear_backward(wdx.data(), wdw.data(), wdb.data(), dy.data(), x.data(), w.data(), N, K, M, ctx);
    else
      cpu::matmul_backward(wdx.data(), wdw.data(), wdb.data(), dy.data(), x.data(), w.data(), N, K, M, ctx);
    EXPECT_TRUE(test::bit_identical(dx, wdx, "dx"));
    EXPECT_TRUE(test::bit_identical(dw, wdw, "dw"));
    EXPECT_TRUE(test::bit_identical(db, wdb, "db"));
  }
}

// Every tensor in any storage (a GPU plan's 16-bit stream, its gradient and the small weights'
// gradients): dx, dgamma, dbeta (+=) onto nonzero values, each rounded once on store.
TEST_F(BackendOps, LayerNormBackwardAccumulates) {
  const int N = 4, C = 32;
  const float eps = 1e-5f;
  const std::vector<float> x0 = test::randn(static_cast<size_t>(N) * C, 41),
                           dout0 = test::randn(x0.size(), 42);
  const std::vector<float> g0 = test::randn(C, 43), dx0 = test::randn(x0.size(), 44),
                           dg0 = test::randn(C, 45), db0 = test::randn(C, 46);
  std::vector<float> mean0(N), rstd0(N);
  for (int n = 0; n < N; ++n) {
    double s = 0.0, q = 0.0;
    for (int c = 0; c < C; ++c) s += x0[static_cast<size_t>(n) * C + c];
    const double m = s / C;
    for (int c = 0; c < C; ++c) q += std::pow(x0[static_cast<size_t>(n) * C + c] - m, 2);
    mean0[static_cast<size_t>(n)] = static_cast<float>(m);
    rstd0[static_cast<size_t>(n)] = static_cast<float>(1.0 / std::sqrt(q / C + eps));
  }
  const StorageType kAll[] = {F32, BF16, F16};
  for (StorageType dxt : kAll)
    for (StorageType dgt : kAll)
      for (StorageType doutt : kAll)
        for (StorageType xt : kAll)
          for (StorageType gt : kAll) {
            const std::string what = std::string("dx=") + storage_name(dxt) + " dgamma=" + storage_name(dgt) +
                                     " dout=" + storage_name(doutt) + " x=" + storage_name(xt) +
                                     " gamma=" + storage_name(gt);
            Buf x(xt, x0), dout(doutt, dout0), g(gt, g0), dx(dxt, dx0), dg(dgt, dg0), db(dgt, db0),
                mean(F32, mean0), rstd(F32, rstd0);
            // The reference from what the op reads: the stored inputs and starting values.
            const std::vector<float> xs = x.values(), ds = dout.values(), gs = g.values();
            const std::vector<float> dxs = dx.values(), dgs = dg.values(), dbs = db.values();
            be.layernorm_backward({dx.view({N, C}), dg.view({C}), db.view({C}), dout.view({N, C}),
                                   x.view({N, C}), g.view({C}), mean.view({N}), rstd.view({N})});
            std::vector<double> rdx(x0.size()), rdg(dgs.begin(), dgs.end()), rdb(dbs.begin(), dbs.end());
            for (int n = 0; n < N; ++n) {
              const double m = mean0[static_cast<size_t>(n)], r = rstd0[static_cast<size_t>(n)];
              double sd = 0.0, sdx = 0.0;
              for (int c = 0; c < C; ++c) {
                const size_t i = static_cast<size_t>(n) * C + c;
                const double xh = (xs[i] - m) * r,
                             d = static_cast<double>(ds[i]) * gs[static_cast<size_t>(c)];
                sd += d;
                sdx += d * xh;
                rdg[static_cast<size_t>(c)] += ds[i] * xh;
                rdb[static_cast<size_t>(c)] += ds[i];
              }
              for (int c = 0; c < C; ++c) {
                const size_t i = static_cast<size_t>(n) * C + c;
                const double xh = (xs[i] - m) * r,
                             d = static_cast<double>(ds[i]) * gs[static_cast<size_t>(c)];
                rdx[i] = dxs[i] + r * (d - sd / C - xh * sdx / C);
              }
            }
            // fp32 sums in another order (the kernel's per-chunk partial sums), then one rounding.
            auto tol = [](StorageType t) { return t == F32 ? Tol{1e-4, 1e-4} : tol_for(t); };
            EXPECT_TRUE(all_close(dx.values(), rdx, tol(dxt), what + " dx (+=)"));
            EXPECT_TRUE(all_close(dg.values(), rdg, tol(dgt), what + " dgamma (+=)"));
            EXPECT_TRUE(all_close(db.values(), rdb, tol(dgt), what + " dbeta (+=)"));
          }
}

// Softmax cross-entropy in float64 from the logits as stored [N, Vp]: each row's loss and
// dloss·(softmax - onehot) over the first V columns; zero on the padding and on ignored rows.
struct CrossEntropyRef {
  std::vector<double> losses, dlogits;
};
CrossEntropyRef cross_entropy_ref(const std::vector<float>& logits, const std::vector<int>& targets,
                                  const std::vector<float>& dloss, int V, int Vp) {
  const size_t N = targets.size();
  CrossEntropyRef r{std::vector<double>(N, 0.0), std::vector<double>(logits.size(), 0.0)};
  for (size_t n = 0; n < N; ++n) {
    const float* l = logits.data() + n * static_cast<size_t>(Vp);
    double mx = -1e300, s = 0.0;
    for (int v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(l[v]));
    for (int v = 0; v < V; ++v) s += std::exp(l[v] - mx);
    const int t = targets[n];
    if (t < 0) continue;
    r.losses[n] = -(l[t] - mx - std::log(s));
    for (int v = 0; v < V; ++v)
      r.dlogits[n * static_cast<size_t>(Vp) + static_cast<size_t>(v)] =
          dloss[n] * (std::exp(l[v] - mx) / s - (v == t ? 1.0 : 0.0));
  }
  return r;
}

// Logits in any storage (16-bit on a GPU plan), dlogits in any storage or in place in the
// logits (same dtype).
TEST_F(BackendOps, CrossEntropyWritesDlogitsInAnyStorage) {
  const int N = 6, V = 37, Vp = 48;
  const std::vector<float> l0 = test::randn(static_cast<size_t>(N) * Vp, 51, 3.0f);
  const std::vector<int> targets = {0, 36, -1, 5, 17, 2};
  const std::vector<float> dl0(N, 1.0f / 5.0f);
  for (StorageType lt : {F32, BF16, F16})
    for (StorageType dt : {F32, BF16, F16})
      for (bool alias : {false, true}) {
        if (alias && dt != lt) continue;
        Buf logits(lt, l0), losses(F32, N), dloss(F32, dl0), dlog(dt, l0.size());
        const CrossEntropyRef ref = cross_entropy_ref(logits.values(), targets, dl0, V, Vp);
        CrossEntropyArgs a;
        a.losses = losses.view({N});
        a.logits = logits.view({N, Vp});
        a.dlogits = alias ? a.logits : dlog.view({N, Vp});
        a.targets = ints(targets);
        a.dloss = dloss.view({N});
        a.vocab = V;
        be.cross_entropy(a);
        const std::string what = std::string("logits=") + storage_name(lt) + " dlogits=" + storage_name(dt) +
                                 (alias ? " in place" : "");
        EXPECT_TRUE(all_close(losses.values(), ref.losses, {1e-5, 1e-5}, what + " losses"));
        EXPECT_TRUE(all_close(alias ? logits.values() : dlog.values(), ref.dlogits, tol_for(dt), what));
      }
}

// Causal attention in float64 from the values the op reads, forward and backward:
//   S = Q·K^T·scale (causal), P = softmax(S), Y = P·V;  dV = P^T·dY, dP = dY·V^T,
//   dS = P ⊙ (dP - rowsum(dP ⊙ P)), dQ = dS·K·scale, dK = dS^T·Q·scale.
struct AttentionRef {
  std::vector<double> y, dqkv;
};
AttentionRef attention_ref(const std::vector<float>& qkv, const std::vector<float>& dy, int B, int T, int C,
                           int NH) {
  const int hs = C / NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  AttentionRef r{std::vector<double>(static_cast<size_t>(B) * T * C), std::vector<double>(qkv.size(), 0.0)};
  auto at = [&](int b, int t, int part, int h, int d) {
    return static_cast<size_t>(b * T + t) * 3 * C + static_cast<size_t>(part * C + h * hs + d);
  };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        std::vector<double> p(static_cast<size_t>(t) + 1), dp(p.size());
        double mx = -1e300, sum = 0.0;
        for (int u = 0; u <= t; ++u) {
          double sc = 0.0;
          for (int d = 0; d < hs; ++d)
            sc += static_cast<double>(qkv[at(b, t, 0, h, d)]) * qkv[at(b, u, 1, h, d)];
          p[static_cast<size_t>(u)] = sc * scale;
          mx = std::max(mx, p[static_cast<size_t>(u)]);
        }
        for (double& v : p) sum += (v = std::exp(v - mx));
        for (double& v : p) v /= sum;
        double dot_pdp = 0.0;
        for (int u = 0; u <= t; ++u) {
          double g = 0.0;
          for (int d = 0; d < hs; ++d) {
            const size_t o = static_cast<size_t>(b * T + t) * C + static_cast<size_t>(h * hs + d);
            r.y[o] += p[static_cast<size_t>(u)] * qkv[at(b, u, 2, h, d)];
            g += static_cast<double>(dy[o]) * qkv[at(b, u, 2, h, d)];
            r.dqkv[at(b, u, 2, h, d)] += p[static_cast<size_t>(u)] * dy[o];
          }
          dp[static_cast<size_t>(u)] = g;
          dot_pdp += g * p[static_cast<size_t>(u)];
        }
        for (int u = 0; u <= t; ++u) {
          const double ds = p[static_cast<size_t>(u)] * (dp[static_cast<size_t>(u)] - dot_pdp) * scale;
          for (int d = 0; d < hs; ++d) {
            r.dqkv[at(b, t, 0, h, d)] += ds * qkv[at(b, u, 1, h, d)];
            r.dqkv[at(b, u, 1, h, d)] += ds * qkv[at(b, t, 0, h, d)];
          }
        }
      }
  return r;
}

TEST_F(BackendOps, CausalAttentionForwardAndBackward) {
  const int B = 2, T = 9, C = 16, NH = 2;
  const std::vector<float> qkv0 = test::randn(static_cast<size_t>(B) * T * 3 * C, 81),
                           dy0 = test::randn(static_cast<size_t>(B) * T * C, 82);
  struct Case {
    AttentionDtypes t;
    Tol tol;
  };
  const Case cases[] = {{{F32, F32, F32, ComputeType::F32, ComputeType::F32}, {2e-5, 2e-5}},
                        {{F32, F32, F32, ComputeType::TF32, ComputeType::TF32}, {1e-2, 1e-2}},
                        {{BF16, BF16, BF16, ComputeType::BF16, ComputeType::BF16}, {6e-2, 4e-2}},
                        {{F16, F16, F16, ComputeType::F16, ComputeType::F16}, {1e-2, 1e-2}},
                        {{BF16, F32, F32, ComputeType::BF16, ComputeType::F32}, {4e-2, 2e-2}}};
  for (const Case& k : cases) {
    const std::string what = std::string("qkv=") + storage_name(k.t.qkv) +
                             " probs=" + storage_name(k.t.probs) + " scores=" + compute_name(k.t.scores) +
                             " values=" + compute_name(k.t.values);
    Buf qkv(k.t.qkv, qkv0), out(k.t.out, dy0.size()), dy(k.t.out, dy0), dqkv(k.t.qkv, qkv0.size());
    const AttentionBytes need = be.attention_bytes(B, T, C, NH, k.t);
    std::vector<char> saved(need.saved + 64), scratch(need.scratch + 64);
    const View sv = View::of(saved.data(), BF16, {static_cast<std::int64_t>(saved.size() / 2)});
    const View sc = View::of(scratch.data(), BF16, {static_cast<std::int64_t>(scratch.size() / 2)});
    be.attention({out.view({B * T, C}), qkv.view({B * T, 3 * C}), sv, sc, B, T, NH, k.t});
    be.attention_backward(
        {dqkv.view({B * T, 3 * C}), dy.view({B * T, C}), out.view({B * T, C}), qkv.view({B * T, 3 * C}), sv, sc,
         B, T, NH, k.t});
    const AttentionRef ref = attention_ref(qkv.values(), dy.values(), B, T, C, NH);
    EXPECT_TRUE(all_close(out.values(), ref.y, k.tol, what + " out"));
    EXPECT_TRUE(all_close(dqkv.values(), ref.dqkv, k.tol, what + " dqkv"));
  }
  // Too little room for what the backend saves: refused before anything is written.
  const AttentionDtypes f32{};
  Buf qkv(F32, qkv0), out(F32, dy0.size());
  std::vector<float> small(8);
  expect_error(
      [&] {
        be.attention({out.view({B * T, C}), qkv.view({B * T, 3 * C}), View::of(small.data(), F32, {8}),
                      View::of(small.data(), F32, {8}), B, T, NH, f32});
      },
      "[backend cpu] attention: saved holds 32 bytes, needs ");
}

// The sampled loss is the loss on the labels it drew: the plain cross-entropy's dlogits on those
// targets bit for bit (its losses to rounding: summed from the pass's block sums), and the same
// labels for the same (seed, counter). Also with a 16-bit dlogits, and in place in 16-bit logits
// (a GPU plan's), where both runs round the same fp32 dlogits once.
TEST_F(BackendOps, SampledCrossEntropyIsTheLossOnItsOwnLabels) {
  const int N = 8, V = 30, Vp = 32;
  const std::vector<float> l0 = test::randn(static_cast<size_t>(N) * Vp, 91, 2.0f), dl0(N, 0.125f);
  struct Case {
    StorageType logits, dlogits;
    bool in_place;
  };
  for (const Case& k : {Case{F32, F32, false}, Case{F32, BF16, false}, Case{BF16, BF16, true}}) {
    const std::string what = std::string("logits=") + storage_name(k.logits) +
                             " dlogits=" + storage_name(k.dlogits) + (k.in_place ? " in place" : "");
    // One loss on fresh logits (the in-place runs overwrite them): the losses and the dlogits.
    auto loss = [&](int* sampled, const int* targets) {
      Buf logits(k.logits, l0), losses(F32, N), dloss(F32, dl0), dlog(k.dlogits, l0.size());
      CrossEntropyArgs a;
      a.losses = losses.view({N});
      a.logits = logits.view({N, Vp});
      a.dlogits = k.in_place ? a.logits : dlog.view({N, Vp});
      a.dloss = dloss.view({N});
      a.vocab = V;
      if (sampled) a.sampled = View::ints(sampled, N);
      if (targets) a.targets = View::ints(targets, N);
      a.seed = 5;
      a.counter = 3;
      be.cross_entropy(a);
      return std::make_pair(losses.values(), (k.in_place ? logits : dlog).values());
    };
    std::vector<int> labels(N, -5), again(N, -5);
    const auto [drawn_losses, drawn_dlogits] = loss(labels.data(), nullptr);
    for (int l : labels) ASSERT_TRUE(l >= 0 && l < V) << what << ": " << l;
    // dlogits was written (in place too): zero on the padded columns, where the logits are not.
    for (int n = 0; n < N; ++n)
      for (int v = V; v < Vp; ++v) EXPECT_EQ(drawn_dlogits[static_cast<size_t>(n * Vp + v)], 0.0f) << what;
    const auto [target_losses, target_dlogits] = loss(nullptr, labels.data());
    EXPECT_TRUE(all_close(drawn_losses, test::to_double(target_losses), {1e-6, 1e-6}, what + " losses"));
    EXPECT_TRUE(test::bit_identical(drawn_dlogits, target_dlogits, what + " dlogits"));
    loss(again.data(), nullptr);
    EXPECT_EQ(again, labels) << what;
  }
}

// Several branches add into one gradient (BERT's residual stream): dx (+=) when asked.
TEST_F(BackendOps, LinearBackwardAccumulatesDxWhenAsked) {
  const int N = 4, K = 16, M = 8;
  Buf x(F32, test::randn(static_cast<size_t>(N) * K, 101)),
      w(F32, test::randn(static_cast<size_t>(K) * M, 102));
  Buf dy(F32, test::randn(static_cast<size_t>(N) * M, 103)), dw(F32, static_cast<size_t>(K) * M, 0.0f);
  Buf once(F32, static_cast<size_t>(N) * K), twice(F32, static_cast<size_t>(N) * K);
  LinearBackwardArgs a;
  a.dx = once.view({N, K});
  a.dw = dw.view({K, M});
  a.dy = dy.view({N, M});
  a.x = x.view({N, K});
  a.w = w.view({K, M});
  be.linear_backward(a);
  a.dx = twice.view({N, K});
  be.linear_backward(a);
  a.dx_accumulate = true;
  be.linear_backward(a);
  const std::vector<float> o = once.values(), t = twice.values();
  for (size_t i = 0; i < o.size(); ++i) ASSERT_EQ(t[i], 2.0f * o[i]) << i;
  // A 16-bit dx (BERT's stream gradient on a GPU's plan): the sum is rounded once, onto the
  // stored first value.
  for (StorageType st : {BF16, F16}) {
    Buf d(st, static_cast<size_t>(N) * K);
    a.dx = d.view({N, K});
    a.dx_accumulate = false;
    be.linear_backward(a);
    a.dx_accumulate = true;
    be.linear_backward(a);
    std::vector<double> ref(o.size());
    for (size_t i = 0; i < o.size(); ++i) ref[i] = stored(o[i], st) + static_cast<double>(o[i]);
    EXPECT_TRUE(all_close(d.values(), ref, tol_for(st), std::string("dx (+=) in ") + storage_name(st)));
  }
}

// BERT's attention: every query over the real keys of its sequence (padded keys get no weight).
TEST_F(BackendOps, BidirectionalAttentionUnderAKeyMask) {
  const int B = 2, T = 6, C = 8, NH = 2, hs = C / NH;
  const std::vector<float> qkv0 = test::randn(static_cast<size_t>(B) * T * 3 * C, 111);
  const std::vector<int> mask = {1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1};
  for (const AttentionDtypes& t :
       {AttentionDtypes{}, AttentionDtypes{BF16, BF16, BF16, ComputeType::BF16, ComputeType::BF16}}) {
    Buf qkv(t.qkv, qkv0), out(t.out, static_cast<size_t>(B) * T * C);
    const AttentionBytes need = be.attention_bytes(B, T, C, NH, t);
    std::vector<char> saved(need.saved + 64), scratch(need.scratch + 64);
    AttentionArgs a{out.view({B * T, C}),
                    qkv.view({B * T, 3 * C}),
                    View::of(saved.data(), BF16, {static_cast<std::int64_t>(saved.size() / 2)}),
                    View::of(scratch.data(), BF16, {static_cast<std::int64_t>(scratch.size() / 2)}),
                    B,
                    T,
                    NH,
                    t};
    a.causal = false;
    a.key_mask = ints(mask);
    be.attention(a);
    const std::vector<float> q = qkv.values();
    std::vector<double> ref(static_cast<size_t>(B) * T * C, 0.0);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < T; ++i) {
          std::vector<double> p(static_cast<size_t>(T), 0.0);
          double mx = -1e300, sum = 0.0;
          for (int j = 0; j < T; ++j) {
            if (!mask[static_cast<size_t>(b * T + j)]) continue;
            double s = 0.0;
            for (int d = 0; d < hs; ++d)
              s += static_cast<double>(q[static_cast<size_t>(b * T + i) * 3 * C + h * hs + d]) *
                   q[static_cast<size_t>(b * T + j) * 3 * C + C + h * hs + d];
            p[static_cast<size_t>(j)] = s / std::sqrt(static_cast<double>(hs));
            mx = std::max(mx, p[static_cast<size_t>(j)]);
          }
          for (int j = 0; j < T; ++j)
            if (mask[static_cast<size_t>(b * T + j)])
              sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
          for (int j = 0; j < T; ++j) {
            if (!mask[static_cast<size_t>(b * T + j)]) continue;
            for (int d = 0; d < hs; ++d)
              ref[static_cast<size_t>(b * T + i) * C + h * hs + d] +=
                  p[static_cast<size_t>(j)] / sum *
                  q[static_cast<size_t>(b * T + j) * 3 * C + 2 * C + h * hs + d];
          }
        }
    EXPECT_TRUE(all_close(out.values(), ref, t.out == F32 ? Tol{2e-5, 2e-5} : Tol{6e-2, 4e-2},
                          std::string("masked attention ") + storage_name(t.qkv)));
  }
}

// Rows in any storage: scatter_add_rows' dst (+=) in 16 bits is one fp32 add of the stored values
// rounded once (exact, so a rounding other than to nearest even shows), argmax_rows reads x
// as stored.
TEST_F(BackendOps, GatherScatterAndArgmaxRows) {
  const int N = 5, C = 3, R = 3;
  const std::vector<float> src0 = test::randn(static_cast<size_t>(N) * C, 121),
                           add0 = test::randn(static_cast<size_t>(R) * C, 122);
  const std::vector<int> rows = {4, 0};
  Buf src(F32, src0), dst(BF16, static_cast<size_t>(R) * C, 9.0f);
  be.gather_rows(dst.view({R, C}), src.view({N, C}), ints(rows));
  const std::vector<float> d = dst.values();
  for (int c = 0; c < C; ++c) {
    EXPECT_EQ(d[static_cast<size_t>(c)], stored(src0[static_cast<size_t>(4 * C + c)], BF16));
    EXPECT_EQ(d[static_cast<size_t>(C + c)], stored(src0[static_cast<size_t>(c)], BF16));
    EXPECT_EQ(d[static_cast<size_t>(2 * C + c)], 0.0f) << "rows after count are zeroed";
  }
  for (StorageType dt : {F32, BF16, F16})
    for (StorageType st : {F32, BF16, F16}) {
      Buf acc(dt, src0), add(st, add0);
      const std::vector<float> before = acc.values(), adds = add.values();
      be.scatter_add_rows(acc.view({N, C}), add.view({R, C}), ints(rows));
      const std::vector<float> a = acc.values();
      for (int n = 0; n < N; ++n)
        for (int c = 0; c < C; ++c) {
          const size_t i = static_cast<size_t>(n * C + c);
          const int r = n == 4 ? 0 : n == 0 ? 1 : -1;  // the src row added into row n, if any
          const float want = r < 0 ? before[i] : stored(before[i] + adds[static_cast<size_t>(r * C + c)], dt);
          EXPECT_EQ(a[i], want) << "dst=" << storage_name(dt) << " src=" << storage_name(st) << " [" << n
                                << "," << c << "]";
        }
    }
  // The last column is outside n; row 3's 8.01 ties with 8 in bf16 (not in fp32 or fp16).
  const std::vector<float> x0 = {0, 5, 5, 1, 9, 2, 3, 3, 1, 8, 8, 8, 8, 8.01f, 7, 100};
  for (StorageType xt : {F32, BF16, F16}) {
    Buf x(xt, x0);
    std::vector<int> best(4, -1);
    be.argmax_rows(View::ints(best.data(), 4), x.view({4, 4}), 3);
    const std::vector<float> xs = x.values();
    std::vector<int> want(4);
    for (size_t r = 0; r < 4; ++r)
      for (size_t i = 1; i < 3; ++i)
        if (xs[r * 4 + i] > xs[r * 4 + static_cast<size_t>(want[r])]) want[r] = static_cast<int>(i);
    EXPECT_EQ(best, want) << storage_name(xt);
    if (xt == F32) {
      EXPECT_EQ(best, (std::vector<int>{1, 0, 1, 1}));  // the first of ties
    }
    if (xt == BF16) {
      EXPECT_EQ(best[3], 0) << "8.01 is 8 in bf16";
    }
  }
  expect_error(
      [&] {
        be.gather_rows(dst.view({R, C}), src.view({N, C}), ints(std::vector<int>{5}));
      },
      "[backend cpu] gather_rows: row index 5 is outside [0, 5)");
}

// The tables and their gradients in any storage (a GPU plan's 16-bit embeddings), out and dout
// in any: the gradients (+=) onto nonzero values, rounded once; BERT's pad row keeps its value.
TEST_F(BackendOps, EmbeddingsForGpt2AndBert) {
  const int B = 2, T = 3, C = 8, V = 10;
  const std::vector<int> tokens = {1, 4, 9, 0, 4, 4}, types = {0, 0, 1, 0, 1, 1};
  const std::vector<float> word0 = test::randn(static_cast<size_t>(V) * C, 61),
                           pos0 = test::randn(static_cast<size_t>(T + 2) * C, 62);
  const std::vector<float> type0 = test::randn(2 * C, 63),
                           dout0 = test::randn(static_cast<size_t>(B) * T * C, 64);
  const std::vector<float> dword0 = test::randn(word0.size(), 65), dpos0 = test::randn(pos0.size(), 66),
                           dtype0 = test::randn(type0.size(), 67);
  // fp32: sums of a few values in another order; 16 bits: then one rounding.
  auto tol = [](StorageType t) { return t == F32 ? Tol{1e-6, 1e-6} : tol_for(t); };
  for (bool bert : {false, true})
    for (StorageType tt : {F32, BF16, F16})
      for (StorageType ot : {F32, BF16, F16}) {
        const std::string what =
            std::string(bert ? "bert" : "gpt2") + " tables=" + storage_name(tt) + " out=" + storage_name(ot);
        Buf word(tt, word0), pos(tt, pos0), type(tt, type0), out(ot, dout0.size());
        EmbeddingArgs a;
        a.out = out.view({B * T, C});
        a.tokens = ints(tokens);
        a.B = B;
        a.T = T;
        a.word = word.view({V, C});
        a.pos = pos.view({T + 2, C});
        if (bert) {
          a.types = ints(types);
          a.type_table = type.view({2, C});
        }
        be.embedding(a);
        Buf dw(tt, dword0), dp(tt, dpos0), dt(tt, dtype0), dout(ot, dout0);
        const std::vector<float> ws = word.values(), ps = pos.values(), ts = type.values(),
                                 ds = dout.values();
        const std::vector<float> dws = dw.values(), dps = dp.values(), dts = dt.values();
        std::vector<double> ref(dout0.size());
        std::vector<double> rdw(dws.begin(), dws.end()), rdp(dps.begin(), dps.end()),
            rdt(dts.begin(), dts.end());
        const int pad = bert ? 4 : -1;
        for (int i = 0; i < B * T; ++i)
          for (int c = 0; c < C; ++c) {
            const size_t o = static_cast<size_t>(i) * C + c;
            const size_t tw = static_cast<size_t>(tokens[static_cast<size_t>(i)]) * C + c,
                         tp = static_cast<size_t>(i % T) * C + c;
            const size_t tty = static_cast<size_t>(types[static_cast<size_t>(i)]) * C + c;
            ref[o] = static_cast<double>(ws[tw]) + ps[tp] + (bert ? ts[tty] : 0.0f);
            if (tokens[static_cast<size_t>(i)] != pad) rdw[tw] += ds[o];
            rdp[tp] += ds[o];
            if (bert) rdt[tty] += ds[o];
          }
        EXPECT_TRUE(all_close(out.values(), ref, tol(ot), what + " embedding"));
        EmbeddingBackwardArgs g;
        g.dword = dw.view({V, C});
        g.dpos = dp.view({T + 2, C});
        g.dout = dout.view({B * T, C});
        g.tokens = ints(tokens);
        g.B = B;
        g.T = T;
        if (bert) {
          g.types = ints(types);
          g.dtype = dt.view({2, C});
          g.pad_token = pad;
        }
        be.embedding_backward(g);
        EXPECT_TRUE(all_close(dw.values(), rdw, tol(tt), what + " dword (+=)"));
        EXPECT_TRUE(all_close(dp.values(), rdp, tol(tt), what + " dpos (+=)"));
        if (bert) {
          EXPECT_TRUE(all_close(dt.values(), rdt, tol(tt), what + " dtype (+=)"));
          // Widened and rounded back without a contribution: the same bits.
          const std::vector<float> dwv = dw.values();
          for (int c = 0; c < C; ++c)
            EXPECT_EQ(dwv[static_cast<size_t>(pad * C + c)], dws[static_cast<size_t>(pad * C + c)]) << what;
        }
      }
}

// Packed sequences whose offsets disagree with the tensors are refused before a row moves, one
// line naming the op: an end short of the rows, a start other than 0, a sequence longer than T.
TEST_F(BackendOps, PackedOffsetsThatDisagreeWithTheRowsAreRefused) {
  const int B = 2, T = 4, C = 8, V = 10;
  const std::vector<int> tokens = {1, 2, 3, 4, 5, 6}, types(6, 0);
  Buf word(F32, test::randn(static_cast<size_t>(V) * C, 91)), pos(F32, test::randn(static_cast<size_t>(T) * C, 92));
  Buf type(F32, test::randn(2 * C, 93)), out(F32, 6 * C);
  const auto embed = [&](std::vector<int> cu) {
    EmbeddingArgs a;
    a.out = out.view({6, C});
    a.tokens = ints(tokens);
    a.B = B;
    a.T = T;
    a.cu_seqlens = ints(cu);
    a.word = word.view({V, C});
    a.pos = pos.view({T, C});
    a.types = ints(types);
    a.type_table = type.view({2, C});
    be.embedding(a);
  };
  embed({0, 3, 6});  // agrees: runs
  expect_error([&] { embed({0, 3, 5}); },
               "[backend cpu] embedding: packed sequences end at row 5 (cu_seqlens[2]), but the tensors hold 6 rows");
  expect_error([&] { embed({1, 3, 6}); }, "[backend cpu] embedding: cu_seqlens starts at 1, not 0");
  expect_error([&] { embed({0, 1, 6}); }, "[backend cpu] embedding: packed sequence 1 has 5 rows, not in [1, 4]");
}

TEST_F(BackendOps, CastRoundsOnceToNearestEven) {
  const std::vector<float> v = test::randn(100, 71, 100.0f);
  for (StorageType to : {F32, BF16, F16})
    for (StorageType from : {F32, BF16, F16}) {
      Buf src(from, v), dst(to, v.size());
      be.cast(dst.view({10, 10}), src.view({100}));
      const std::vector<float> s = src.values(), d = dst.values();
      for (size_t i = 0; i < v.size(); ++i)
        ASSERT_EQ(d[i], stored(s[i], to))
            << storage_name(from) << " -> " << storage_name(to) << " [" << i << "]";
    }
}

// A GPU plan's 16-bit weight gradients of one micro-batch into the fp32 master gradients:
// dst (+=) src widened, one fp32 add each (exact). The masters are fp32: a 16-bit dst is refused
// before anything is written.
TEST_F(BackendOps, AccumulateWidensIntoFp32) {
  const int R = 4, C = 10;
  const std::vector<float> d0 = test::randn(static_cast<size_t>(R) * C, 131),
                           s0 = test::randn(d0.size(), 132, 0.01f);
  for (StorageType st : {F32, BF16, F16}) {
    Buf dst(F32, d0), src(st, s0);
    be.accumulate(dst.view({R, C}), src.view({R * C}));  // elementwise: only the counts must agree
    const std::vector<float> got = dst.values(), ss = src.values();
    for (size_t i = 0; i < d0.size(); ++i)
      ASSERT_EQ(got[i], d0[i] + ss[i]) << storage_name(st) << " [" << i << "]";
  }
  Buf narrow_dst(BF16, d0), src(BF16, s0);
  const std::vector<float> before = narrow_dst.values();
  expect_error(
      [&] {
        be.accumulate(narrow_dst.view({R, C}), src.view({R, C}));
      },
      "[backend cpu] accumulate: dst is bf16[4,10], expected fp32");
  EXPECT_TRUE(test::bit_identical(narrow_dst.values(), before, "the refused dst"));
  Buf dst(F32, d0);
  expect_error([&] { be.accumulate(dst.view({R * C}), src.view({R * C - 1})); },
               "[backend cpu] accumulate: dst fp32[40] and src bf16[39] differ in size");
}

// The optimizer's kernels, against float64 transcriptions of their definitions (PyTorch's AdamW,
// the Sophia authors' update, GradScaler's unscale); each reads fp32 tensors of one size and
// refuses others before writing.
TEST_F(BackendOps, OptimizerOpsMatchTheirDefinitions) {
  const size_t n = 1037;  // not a multiple of any vector width
  const std::vector<float> p0 = test::randn(n, 141), g = test::randn(n, 142, 0.1f),
                           m0 = test::randn(n, 143, 0.01f);
  std::vector<float> v0 = test::randn(n, 144, 1e-3f), h0 = test::randn(n, 145, 1e-3f);
  for (size_t i = 0; i < n; ++i) v0[i] = std::fabs(v0[i]), h0[i] = std::fabs(h0[i]);
  const auto flat = [n](std::vector<float>& x) {
    return View::f32(x.data(), {static_cast<std::int64_t>(n)});
  };
  std::vector<float> grads = g;
  {  // AdamW at step 3, decayed, with a clip factor
    std::vector<float> p = p0, m = m0, v = v0;
    const float lr = 0.01f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
    be.adamw({flat(p), flat(grads), flat(m), flat(v), lr, b1, b2, eps, wd, 3, gs});
    for (size_t i = 0; i < n; ++i) {
      const double gi = double(g[i]) * gs, mi = b1 * double(m0[i]) + (1.0 - b1) * gi;
      const double vi = b2 * double(v0[i]) + (1.0 - b2) * gi * gi;
      const double bc1 = 1.0 - std::pow(double(b1), 3), bc2 = 1.0 - std::pow(double(b2), 3);
      const double want =
          p0[i] * (1.0 - double(lr) * wd) - lr / bc1 * mi / (std::sqrt(vi) / std::sqrt(bc2) + eps);
      ASSERT_NEAR(m[i], mi, 1e-6 * (1.0 + std::fabs(mi))) << i;
      ASSERT_NEAR(p[i], want, 1e-5 * (1.0 + std::fabs(want))) << i;
    }
  }
  {  // Sophia: decay, momentum, the clipped sign step; then the Hessian EMA and the win count
    std::vector<float> p = p0, m = m0, h = h0;
    const float lr = 0.01f, b1 = 0.965f, rho_b = 40.0f, wd = 0.1f, gs = 0.5f;
    be.sophia({flat(p), flat(grads), flat(m), flat(h), lr, b1, rho_b, wd, gs});
    std::int64_t unclipped = 0;
    for (size_t i = 0; i < n; ++i) {
      const double mi = b1 * double(m0[i]) + (1.0 - b1) * double(g[i]) * gs;
      const double ratio = std::min(std::fabs(mi) / (rho_b * double(h0[i]) + 1e-15), 1.0);
      const double want = p0[i] * (1.0 - double(lr) * wd) - lr * (mi > 0 ? 1.0 : mi < 0 ? -1.0 : 0.0) * ratio;
      ASSERT_NEAR(p[i], want, 1e-6) << i;
      unclipped += std::fabs(m[i]) < rho_b * h[i];
    }
    EXPECT_EQ(be.count_unclipped(flat(m), flat(h), rho_b), unclipped);
    EXPECT_GT(unclipped, 0);
    EXPECT_LT(unclipped, static_cast<std::int64_t>(n));
    be.sophia_hessian(flat(h), flat(grads), 0.99f);
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(h[i], 0.99 * h0[i] + 0.01 * double(g[i]) * g[i], 1e-7 * (1.0 + h[i])) << i;
  }
  {  // sum of squares in double, the same for any thread count; scale; unscale and check
    double want = 0.0;
    for (float x : g) want += double(x) * x;
    const double got = be.sum_squares(flat(grads));
    EXPECT_NEAR(got, want, 1e-12 * want);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    EXPECT_EQ(be.sum_squares(flat(grads)), got);
    omp_set_num_threads(threads);
    std::vector<float> x = g;
    be.scale(flat(x), 0.25f);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], g[i] * 0.25f) << i;
    EXPECT_FALSE(be.unscale_and_check(flat(x), 4.0f));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], g[i]) << i;  // *0.25 then *4: exact
    x[n - 1] = std::nanf("");
    EXPECT_TRUE(be.unscale_and_check(flat(x), 1.0f));
  }
  // fp32 tensors of one size only, refused before anything is written.
  std::vector<float> p = p0, m = m0, v = v0;
  Buf half(BF16, p0);
  const View short_m = View::f32(m.data(), {static_cast<std::int64_t>(n - 1)});
  expect_error(
      [&] {
        be.adamw({flat(p), flat(grads), short_m, flat(v), 0.01f});
      },
      "[backend cpu] adamw: m is fp32[1036], expected 1037 elements");
  expect_error(
      [&] {
        be.adamw({half.view({static_cast<std::int64_t>(n)}), flat(grads), flat(m), flat(v), 0.01f});
      },
      "[backend cpu] adamw: params is bf16[1037], expected fp32");
  expect_error(
      [&] {
        be.adamw({flat(p), flat(grads), flat(m), flat(v), 0.01f, 0.9f, 0.95f, 1e-8f, 0.0f, 0});
      },
      "[backend cpu] adamw: t is 0, expected the 1-based step");
  EXPECT_TRUE(test::bit_identical(p, p0, "the refused update's params"));
  expect_error([&] { be.sum_squares(half.view({static_cast<std::int64_t>(n)})); },
               "[backend cpu] sum_squares: x is bf16[1037], expected fp32");
}

// The CPU backend with no bf16 kernels: it refuses every combination with a bf16 tensor and runs
// the rest as the CPU does. The CPU itself refuses nothing now, but the refusal is the
// interface's (Backend::require, the same on every backend), so a backend that lacks kernels
// stands in for the GPU's.
class NoBf16Backend : public cpu::CpuBackend {
 public:
  using cpu::CpuBackend::CpuBackend;

 protected:
  bool can_run(const OpTypes& t) const override {
    for (int i = 0; i < t.count; ++i)
      if (t.named[static_cast<size_t>(i)].second == BF16) return false;
    return cpu::CpuBackend::can_run(t);
  }
};

// What a backend has no kernel for, and shapes that do not fit: one line naming the op, the
// tensor and the dtypes, before anything is written.
TEST_F(BackendOps, RefusesWhatItCannotRunNamingTheOpAndTheDtypes) {
  const int N = 2, C = 4;
  Buf f(F32, 64, 0.0f), h(BF16, 64, 0.0f), g(F32, 64, 0.0f), one(F32, 64, 1.0f);
  NoBf16Backend no_bf16{ctx};
  const LayerNormBackwardArgs lnb{f.view({N, C}), g.view({C}), g.view({C}), h.view({N, C}),
                                  f.view({N, C}), g.view({C}), g.view({N}), g.view({N})};
  EXPECT_FALSE(no_bf16.supports(lnb));
  LayerNormBackwardArgs lnb16 = lnb;
  lnb16.dout.type = F16;
  EXPECT_TRUE(no_bf16.supports(lnb16));  // delegated
  expect_error([&] { no_bf16.layernorm_backward(lnb); },
               "[backend cpu] layernorm_backward: no kernel for dx=fp32 dgamma=fp32 dbeta=fp32 dout=bf16 x=fp32 "
               "gamma=fp32");
  LinearArgs a;
  a.out = h.view({N, C});
  a.x = one.view({N, C});
  a.w = one.view({C, C});
  a.epilogue = Epilogue::BiasResidual;
  a.residual = f.view({N, C});
  a.math = ComputeType::BF16;
  expect_error(
      [&] { no_bf16.linear(a); },
      "[backend cpu] linear_residual: no kernel for out=bf16 x=fp32 w=fp32 residual=fp32 with bf16 products");
  EXPECT_TRUE(test::bit_identical(h.values(), std::vector<float>(64, 0.0f), "the refused linear's out"));
  const std::vector<int> t(N, 0);
  const CrossEntropyArgs ce{f.view({N}), h.view({N, C}), h.view({N, C}), ints(t), f.view({N}), C};
  expect_error([&] { no_bf16.cross_entropy(ce); },
               "[backend cpu] cross_entropy: no kernel for dlogits=bf16 logits=bf16");
  CrossEntropyArgs sampled = ce;
  int drawn[N] = {};
  sampled.sampled = View::ints(drawn, N);
  sampled.logits = f.view({N, C});
  EXPECT_FALSE(no_bf16.supports(sampled));

  // The CPU itself runs every one of them (they were refused before it widened 16-bit tensors).
  EXPECT_TRUE(be.supports(lnb));
  EXPECT_TRUE(be.supports(a));
  EXPECT_TRUE(be.supports(ce));
  EXPECT_TRUE(be.supports(sampled));
  EXPECT_NO_THROW(be.layernorm_backward(lnb));
  EXPECT_NO_THROW(be.linear(a));
  EXPECT_NO_THROW(be.cross_entropy(ce));

  // Shapes are checked whatever the backend runs.
  a.epilogue = Epilogue::Bias;
  a.residual = View{};
  a.w = one.view({C + 1, C});
  expect_error([&] { be.linear(a); }, "[backend cpu] linear: w is fp32[5,4], expected [4,*]");
  a.w = one.view({C, C});
  a.bias = h.view({C + 1});  // any storage, but one value per output column
  expect_error([&] { be.linear(a); }, "[backend cpu] linear: bias is bf16[5], expected [4]");
  expect_error(
      [&] {
        be.cross_entropy({f.view({N}), View{}, f.view({N, C}), ints(t), View{}, C + 1});
      },
      "[backend cpu] cross_entropy: vocab 5 is outside (0, 4]");
}

TEST_F(BackendOps, SaysWhatItIs) {
  EXPECT_STREQ(be.name(), "cpu");
  EXPECT_EQ(be.caps(), cpu::GemmWorkspace(ctx).caps());
}

}  // namespace
}  // namespace mptrain
