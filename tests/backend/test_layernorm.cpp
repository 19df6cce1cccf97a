// LayerNorm forward (output, mean, rstd) and backward (+= into dinp, dweight, dbias) against
// float64 references; the reference backward is checked by finite differences of the reference
// forward; the parameter gradients are bit-identical for 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backend/ops/layernorm.h"
#include "common/cpu_fp32.h"
#include "op_test_util.h"

namespace mptrain::cpu {
namespace {

using test::all_close;
using test::Guarded;
using test::Tol;

constexpr float kEps = 1e-5f;

struct Ref {
  std::vector<double> out, mean, rstd;
};

Ref ref_forward(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                int N, int C, double eps) {
  Ref r{std::vector<double>(x.size()), std::vector<double>(N), std::vector<double>(N)};
  for (int n = 0; n < N; ++n) {
    const double* xr = x.data() + static_cast<size_t>(n) * C;
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c) m += xr[c];
    m /= C;
    for (int c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
    v /= C;
    const double s = 1.0 / std::sqrt(v + eps);
    for (int c = 0; c < C; ++c) r.out[static_cast<size_t>(n) * C + c] = (xr[c] - m) * s * w[c] + b[c];
    r.mean[n] = m;
    r.rstd[n] = s;
  }
  return r;
}

// Gradients of Σ out ⊙ dout (not accumulated: the callers add the pre-fill).
void ref_backward(std::vector<double>& dx, std::vector<double>& dw, std::vector<double>& db,
                  const std::vector<double>& dout, const std::vector<double>& x, const std::vector<double>& w,
                  int N, int C, double eps) {
  Ref f = ref_forward(x, w, std::vector<double>(C, 0.0), N, C, eps);
  dx.assign(x.size(), 0.0);
  dw.assign(C, 0.0);
  db.assign(C, 0.0);
  for (int n = 0; n < N; ++n) {
    const size_t o = static_cast<size_t>(n) * C;
    double mg = 0, mgn = 0;
    for (int c = 0; c < C; ++c) {
      const double norm = (x[o + c] - f.mean[n]) * f.rstd[n];
      mg += w[c] * dout[o + c];
      mgn += w[c] * dout[o + c] * norm;
      dw[c] += dout[o + c] * norm;
      db[c] += dout[o + c];
    }
    mg /= C;
    mgn /= C;
    for (int c = 0; c < C; ++c) {
      const double norm = (x[o + c] - f.mean[n]) * f.rstd[n];
      dx[o + c] = f.rstd[n] * (w[c] * dout[o + c] - mg - norm * mgn);
    }
  }
}

const int kRows[] = {1, 7, 64};
const int kChannels[] = {31, 32, 33, 127, 128, 129, 768};
const Tol kOutTol{2e-5, 1e-5};
const Tol kStatTol{1e-6, 1e-5};
const Tol kGradTol{5e-5, 1e-4};

struct Inputs {
  std::vector<float> x, w, b;
};
// An offset of 3 and spread of 2 make the variance a difference of large numbers for a one-pass
// formula; weights near 1 as in a trained model.
Inputs make_inputs(int N, int C, uint64_t seed) {
  Inputs in{test::randn(static_cast<size_t>(N) * C, seed, 2.0f), test::randn(C, seed + 1, 0.2f),
            test::randn(C, seed + 2, 0.5f)};
  for (float& v : in.x) v += 3.0f;
  for (float& v : in.w) v += 1.0f;
  return in;
}

TEST(LayerNorm, Forward) {
  uint64_t seed = 50;
  for (int N : kRows)
    for (int C : kChannels) {
      Inputs in = make_inputs(N, C, seed += 3);
      Guarded out(static_cast<size_t>(N) * C), mean(N), rstd(N);
      layernorm_forward(out.data(), mean.data(), rstd.data(), in.x.data(), in.w.data(), in.b.data(), N, C,
                        kEps);
      Ref r = ref_forward(test::to_double(in.x), test::to_double(in.w), test::to_double(in.b), N, C, kEps);
      const std::string what = " N=" + std::to_string(N) + " C=" + std::to_string(C);
      EXPECT_TRUE(all_close(out.values(), r.out, kOutTol, "out" + what));
      EXPECT_TRUE(all_close(mean.values(), r.mean, kStatTol, "mean" + what));
      EXPECT_TRUE(all_close(rstd.values(), r.rstd, kStatTol, "rstd" + what));
      EXPECT_TRUE(out.guards_intact() && mean.guards_intact() && rstd.guards_intact()) << what;
    }
}

TEST(LayerNorm, BackwardAccumulates) {
  uint64_t seed = 500;
  for (int N : {1, 7, 64, 200})  // 200 > the 64 fixed row chunks of the parameter reduction
    for (int C : kChannels) {
      Inputs in = make_inputs(N, C, seed += 7);
      std::vector<float> out(static_cast<size_t>(N) * C), mean(N), rstd(N);
      layernorm_forward(out.data(), mean.data(), rstd.data(), in.x.data(), in.w.data(), in.b.data(), N, C,
                        kEps);
      auto dout = test::randn(out.size(), seed + 3);
      auto dx0 = test::randn(out.size(), seed + 4), dw0 = test::randn(C, seed + 5),
           db0 = test::randn(C, seed + 6);
      Guarded dx(dx0), dw(dw0), db(db0);
      layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), in.x.data(), in.w.data(), mean.data(),
                         rstd.data(), N, C);
      std::vector<double> rdx, rdw, rdb;
      ref_backward(rdx, rdw, rdb, test::to_double(dout), test::to_double(in.x), test::to_double(in.w), N, C,
                   kEps);
      for (size_t i = 0; i < rdx.size(); ++i) rdx[i] += dx0[i];
      for (int c = 0; c < C; ++c) {
        rdw[c] += dw0[c];
        rdb[c] += db0[c];
      }
      const std::string what = " N=" + std::to_string(N) + " C=" + std::to_string(C);
      // Parameter gradients are sums over N rows: scale the absolute tolerance by sqrt(N).
      const Tol ptol{kGradTol.atol * std::sqrt(static_cast<double>(N)), kGradTol.rtol};
      EXPECT_TRUE(all_close(dx.values(), rdx, kGradTol, "dinp" + what));
      EXPECT_TRUE(all_close(dw.values(), rdw, ptol, "dweight" + what));
      EXPECT_TRUE(all_close(db.values(), rdb, ptol, "dbias" + what));
      EXPECT_TRUE(dx.guards_intact() && dw.guards_intact() && db.guards_intact()) << what;
    }
}

TEST(LayerNorm, ReferenceBackwardMatchesFiniteDifferences) {
  const int N = 3, C = 9;
  Inputs in = make_inputs(N, C, 9);
  auto x = test::to_double(in.x), w = test::to_double(in.w), b = test::to_double(in.b);
  auto g = test::to_double(test::randn(x.size(), 10));
  std::vector<double> dx, dw, db;
  ref_backward(dx, dw, db, g, x, w, N, C, kEps);
  auto loss_x = [&](const std::vector<double>& xv) {
    return test::dot(ref_forward(xv, w, b, N, C, kEps).out, g);
  };
  auto loss_w = [&](const std::vector<double>& wv) {
    return test::dot(ref_forward(x, wv, b, N, C, kEps).out, g);
  };
  auto loss_b = [&](const std::vector<double>& bv) {
    return test::dot(ref_forward(x, w, bv, N, C, kEps).out, g);
  };
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(dx[i], test::finite_difference(loss_x, x, i), 1e-6) << i;
  for (int c = 0; c < C; ++c) {
    EXPECT_NEAR(dw[c], test::finite_difference(loss_w, w, c), 1e-6) << c;
    EXPECT_NEAR(db[c], test::finite_difference(loss_b, b, c), 1e-6) << c;
  }
}

TEST(LayerNorm, BackwardIsThreadCountIndependent) {
  const int N = 300, C = 129;
  Inputs in = make_inputs(N, C, 77);
  std::vector<float> out(static_cast<size_t>(N) * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), in.x.data(), in.w.data(), in.b.data(), N, C, kEps);
  auto dout = test::randn(out.size(), 78);
  std::vector<float> dx[2], dw[2], db[2];
  for (int threads : {1, 2}) {
    test::ScopedThreads scope(threads);
    dx[threads - 1].assign(out.size(), 0.0f);
    dw[threads - 1].assign(C, 0.0f);
    db[threads - 1].assign(C, 0.0f);
    layernorm_backward(dx[threads - 1].data(), dw[threads - 1].data(), db[threads - 1].data(), dout.data(),
                       in.x.data(), in.w.data(), mean.data(), rstd.data(), N, C);
  }
  EXPECT_TRUE(test::bit_identical(dx[0], dx[1], "dinp"));
  EXPECT_TRUE(test::bit_identical(dw[0], dw[1], "dweight"));
  EXPECT_TRUE(test::bit_identical(db[0], db[1], "dbias"));
}

// RMSNorm (rms, Llama's): Hugging Face's LlamaRMSNorm in float64, x·rsqrt(mean(x²) + eps)·w.
std::vector<double> rms_forward(const std::vector<double>& x, const std::vector<double>& w, int N, int C,
                                double eps) {
  std::vector<double> out(x.size());
  for (int n = 0; n < N; ++n) {
    const size_t o = static_cast<size_t>(n) * C;
    double sq = 0;
    for (int c = 0; c < C; ++c) sq += x[o + c] * x[o + c];
    const double s = 1.0 / std::sqrt(sq / C + eps);
    for (int c = 0; c < C; ++c) out[o + c] = x[o + c] * s * w[c];
  }
  return out;
}

// The kernel's RMSNorm against the formula, and its gradients against finite differences of the
// formula (no analytic reference in between); the bias arguments stay untouched.
TEST(RmsNorm, ForwardAndBackwardMatchTheFormula) {
  const int N = 5, C = 33;
  Inputs in = make_inputs(N, C, 21);
  auto x = test::to_double(in.x), w = test::to_double(in.w);
  std::vector<float> out(x.size()), rstd(N);
  layernorm_forward_typed(out.data(), StorageType::F32, nullptr, rstd.data(), in.x.data(), in.w.data(), nullptr,
                          N, C, kEps, /*rms=*/true);
  const auto ref = rms_forward(x, w, N, C, kEps);
  EXPECT_TRUE(all_close(out, ref, Tol{1e-6, 1e-6}, "rmsnorm out"));

  auto g = test::randn(x.size(), 22);
  std::vector<float> dx(x.size(), 0.5f), dw(C, -0.25f);
  layernorm_backward(dx.data(), dw.data(), nullptr, g.data(), in.x.data(), in.w.data(), nullptr, rstd.data(), N,
                     C, /*rms=*/true);
  const auto gd = test::to_double(g);
  auto loss_x = [&](const std::vector<double>& xv) { return test::dot(rms_forward(xv, w, N, C, kEps), gd); };
  auto loss_w = [&](const std::vector<double>& wv) { return test::dot(rms_forward(x, wv, N, C, kEps), gd); };
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(dx[i] - 0.5f, test::finite_difference(loss_x, x, i), 2e-5) << i;
  for (int c = 0; c < C; ++c) EXPECT_NEAR(dw[c] + 0.25f, test::finite_difference(loss_w, w, c), 2e-5) << c;
}

}  // namespace
}  // namespace mptrain::cpu
