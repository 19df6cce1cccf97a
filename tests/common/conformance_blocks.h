// The conformance cases of the blocks' ops (tests/common/conformance.h): casts, linears, LayerNorm,
// attention. One generator per op family, each asking the
// backend's supports() about every dtype tuple of its op (in backend.cpp's order of the tensors)
// and listing a case for each it accepts, on a small shape; then the shape classes (tails, tiles,
// head sizes, packed layouts) for the one-storage tuples it accepts. Where the interface's own
// contract fixes a dtype (fp32 statistics, losses and optimizer tensors; a to_operand copy in its
// arithmetic's operand storage; matmul's a and b of one type), only those tuples are asked.
#pragma once
#include "common/conformance.h"

namespace mptrain::conformance {

// One storage's natural arithmetics: fp32 and TF32 for fp32 tensors, the 16-bit format's own.
inline std::vector<ComputeType> natural_maths(StorageType t) {
  if (t == BF16) return {ComputeType::BF16};
  if (t == F16) return {ComputeType::F16};
  return {ComputeType::F32, ComputeType::TF32};
}

// --- elementwise: cast, accumulate, to_operand, zero --------------------------------------------

inline void elementwise_cases(const Backend& be, std::vector<Case>& out) {
  const int sizes[] = {1, 33, 1031};
  for (const auto& t : type_tuples(op_tensors(Op::Cast).size())) {
    const StorageType d = t[0], s = t[1];
    for (const int n : sizes) {
      const std::string shape = " n=" + std::to_string(n);
      if (asks(be, Op::Cast, t))
        out.push_back({Op::Cast, false, "cast " + describe_dtypes(Op::Cast, {d, s}) + shape, [=](Backend& b, Outcome& o) {
                         Tensor src(b, s, {n}, randn(n, 1, 4.0f)), dst(b, d, {n});
                         b.cast(dst.view(), src.view());
                         std::vector<double> ref(n);
                         for (int i = 0; i < n; ++i) ref[i] = stored(src.host()[i], d);
                         o.close("dst", dst.read(), ref, 0.0);
                       }});
      if (d == F32 && asks(be, Op::Accumulate, t))  // dst is fp32 by the interface's contract
        out.push_back({Op::Accumulate, false, "accumulate " + describe_dtypes(Op::Accumulate, {d, s}) + shape,
                       [=](Backend& b, Outcome& o) {
                         Tensor src(b, s, {n}, randn(n, 2)), dst(b, d, {n}, randn(n, 3));
                         const std::vector<double> before = dst.host();
                         b.accumulate(dst.view(), src.view());
                         std::vector<double> ref(n);
                         for (int i = 0; i < n; ++i) ref[i] = stored(before[i] + src.host()[i], d);
                         o.close("dst", dst.read(), ref, 0.0);
                       }});
    }
  }
  for (const ComputeType m : kMaths)
    for (const StorageType d : kStorages) {
      if (d != be.operand_storage(m) && d != compute_storage(m)) continue;  // the entry point's contract
      if (!asks(be, Op::ToOperand, {d, F32}, m)) continue;
      out.push_back({Op::ToOperand, false, "to_operand " + describe_dtypes(Op::ToOperand, {d, F32}, m),
                     [=](Backend& b, Outcome& o) {
                       const int n = 1031;
                       Tensor src(b, F32, {n}, randn(n, 4)), dst(b, d, {n});
                       b.to_operand(dst.view(), src.view(), m);
                       std::vector<double> ref(n);
                       for (int i = 0; i < n; ++i) ref[i] = stored(operand(src.host()[i], m), d);
                       o.close("dst", dst.read(), ref, 0.0);
                     }});
    }
  for (const StorageType t : kStorages)
    for (const int n : sizes)
      out.push_back({Op::Cast, true, std::string("zero ") + storage_name(t) + " n=" + std::to_string(n),
                     [=](Backend& b, Outcome& o) {
                       Tensor v(b, t, {n}, randn(n, 5));
                       b.zero(v.view());
                       o.close("v", v.read(), std::vector<double>(n, 0.0), 0.0);
                     }});
}

// --- linear ---------------------------------------------------------------------------------------

struct LinearShape {
  int N, K, M;
};
inline std::string shape_name(const LinearShape& s) {
  return " N=" + std::to_string(s.N) + " K=" + std::to_string(s.K) + " M=" + std::to_string(s.M);
}
// The small shape every dtype tuple runs (M a tail of any vector width), and the shape classes
// (tails past several tiles) the one-storage tuples run.
inline constexpr LinearShape kLinearSweep{5, 8, 9};
inline constexpr LinearShape kLinearShapes[] = {{33, 40, 65}, {130, 96, 257}};

inline const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::Bias:
      return "bias";
    case Epilogue::BiasGelu:
      return "bias+gelu";
    case Epilogue::BiasGeluErf:
      return "bias+gelu_erf";
    case Epilogue::BiasTanh:
      return "bias+tanh";
    case Epilogue::BiasResidual:
      return "bias+residual";
  }
  return "?";
}

// x[N,K] and w[K,M] (stored [K,M], or nn.Linear's [M,K] read through View::t()), as a product of
// math reads them: acc[n,m] = Σ_k x·w (+ bias).
struct LinearInputs {
  Tensor x, w;
  bool transposed;
  LinearShape s;
  View wv() const { return transposed ? w.view().t() : w.view(); }
  double wat(int k, int m) const {
    return w.host()[transposed ? static_cast<size_t>(m) * s.K + k : static_cast<size_t>(k) * s.M + m];
  }
  std::vector<double> product(ComputeType math, const Tensor* bias) const {
    std::vector<double> acc(static_cast<size_t>(s.N) * s.M);
    for (int n = 0; n < s.N; ++n)
      for (int m = 0; m < s.M; ++m) {
        double a = bias ? bias->host()[m] : 0.0;
        for (int k = 0; k < s.K; ++k)
          a += operand(x.host()[static_cast<size_t>(n) * s.K + k], math) * operand(wat(k, m), math);
        acc[static_cast<size_t>(n) * s.M + m] = a;
      }
    return acc;
  }
};

inline LinearInputs linear_inputs(Backend& b, StorageType xt, StorageType wt, LinearShape s, bool transposed) {
  return {Tensor(b, xt, {s.N, s.K}, randn(static_cast<size_t>(s.N) * s.K, 10, 0.5f)),
          Tensor(b, wt, transposed ? std::vector<std::int64_t>{s.M, s.K} : std::vector<std::int64_t>{s.K, s.M},
                 randn(static_cast<size_t>(s.K) * s.M, 11, 0.3f)),
          transposed, s};
}

// The forward of one epilogue in one dtype tuple: {out, x, w} plus pre (the activations) or the
// residual (its rounding: fp32, or x's storage as a linear's own output) in the tuple's last place.
// The bias: out's storage with the plain epilogue, x's with the others (what the GPU's epilogues
// read), asked by name with the rest.
inline void linear_forward_case(std::vector<Case>& out, Epilogue e, std::vector<StorageType> t, ComputeType m,
                                LinearShape s, bool transposed, bool with_bias, StorageType rounding) {
  const Op op = e == Epilogue::BiasResidual ? Op::LinearResidual : has_activation(e) ? Op::LinearActivation : Op::Linear;
  std::string name = std::string(backend_op_name(op)) + " " + epilogue_name(e) + " " +
                     describe_dtypes(op, t, m) +
                     shape_name(s) + (transposed ? " w=[M,K]ᵀ" : " w=[K,M]") + (with_bias ? "" : " no bias");
  if (e == Epilogue::BiasResidual) name += std::string(" rounding=") + storage_name(rounding);
  out.push_back({op, false, name, [=](Backend& b, Outcome& o) {
                   const LinearInputs in = linear_inputs(b, t[1], t[2], s, transposed);
                   const size_t nm = static_cast<size_t>(s.N) * s.M;
                   Tensor bias(b, e == Epilogue::Bias ? t[0] : t[1], {s.M}, randn(s.M, 12, 0.2f));
                   Tensor y(b, t[0], {s.N, s.M});
                   Tensor pre(b, t.size() > 3 ? t[3] : t[0], {s.N, s.M});
                   Tensor residual(b, t.size() > 3 ? t[3] : t[0], {s.N, s.M}, randn(nm, 13));
                   LinearArgs a;
                   a.out = y.view();
                   a.x = in.x.view();
                   a.w = in.wv();
                   if (with_bias) a.bias = bias.view();
                   a.math = m;
                   a.epilogue = e;
                   if (keeps_pre(e)) a.pre = pre.view();
                   if (e == Epilogue::BiasResidual) {
                     a.residual = residual.view();
                     a.rounding = rounding;
                   }
                   b.linear(a);
                   const std::vector<double> acc = in.product(m, with_bias ? &bias : nullptr);
                   std::vector<double> ref(nm), pref(nm);
                   for (size_t i = 0; i < nm; ++i) {
                     if (e == Epilogue::Bias) ref[i] = acc[i];
                     if (keeps_pre(e)) pref[i] = stored(acc[i], pre.type()), ref[i] = activation(e, pref[i]);
                     if (e == Epilogue::BiasTanh) ref[i] = std::tanh(stored(acc[i], t[0]));
                     if (e == Epilogue::BiasResidual) ref[i] = residual.host()[i] + stored(acc[i], rounding);
                   }
                   const double between = keeps_pre(e) ? ulp(pre.type())
                                          : e == Epilogue::BiasTanh ? ulp(t[0])
                                          : e == Epilogue::BiasResidual ? ulp(rounding) : 0.0;
                   o.close("out", y.read(), ref, tolerance(t[0], {between}));
                   if (keeps_pre(e)) o.close("pre", pre.read(), pref, tolerance(pre.type()));
                 }});
}

inline void linear_cases(const Backend& be, std::vector<Case>& out) {
  for (const Epilogue e : {Epilogue::Bias, Epilogue::BiasGelu, Epilogue::BiasGeluErf, Epilogue::BiasTanh,
                           Epilogue::BiasResidual}) {
    const Op op = e == Epilogue::BiasResidual ? Op::LinearResidual : has_activation(e) ? Op::LinearActivation : Op::Linear;
    for (const auto& t : type_tuples(op_tensors(op).size())) {
      if (e == Epilogue::BiasTanh && t[3] != t[0]) continue;  // tanh keeps no pre: out's type in its place
      for (const ComputeType m : kMaths) {
        if (!asks(be, op, t, m, {{"bias", e == Epilogue::Bias ? t[0] : t[1]}})) continue;
        const bool uniform = std::all_of(t.begin(), t.end(), [&](StorageType s) { return s == t[0]; });
        const std::vector<ComputeType> natural = natural_maths(t[0]);
        const bool classes = uniform && std::find(natural.begin(), natural.end(), m) != natural.end();
        std::vector<StorageType> roundings = {F32};
        if (e == Epilogue::BiasResidual && t[1] != F32) roundings.push_back(t[1]);
        for (const StorageType r : roundings)
          for (const bool transposed : {false, true}) {
            linear_forward_case(out, e, t, m, kLinearSweep, transposed, true, r);
            if (!classes) continue;
            for (const LinearShape& s : kLinearShapes) linear_forward_case(out, e, t, m, s, transposed, true, r);
            if (e == Epilogue::Bias) linear_forward_case(out, e, t, m, kLinearShapes[0], transposed, false, r);
          }
      }
    }
  }
}

// Backward: {dx, dw, dy, x, w} (no dx: dy's type in its place) plus pre for the activations; db in
// dw's type. dx written (=) or accumulated (+=), or absent; dw and db accumulated. With an x_act
// (x came out of that activation): dx written through its derivative at x_pre [N, K] (dx's type).
enum class Dx { Written, Accumulated, Absent };

inline void linear_backward_case(std::vector<Case>& out, Epilogue e, std::vector<StorageType> t, ComputeType m,
                                 LinearShape s, bool transposed, Dx dx_mode, Epilogue x_act = Epilogue::Bias) {
  const bool through = has_activation(x_act);
  const Op op = has_activation(e) || through ? Op::LinearActivationBackward : Op::LinearBackward;
  const char* dx_name = dx_mode == Dx::Written ? " dx=" : dx_mode == Dx::Accumulated ? " dx+=" : " no dx";
  const std::string name = std::string(backend_op_name(op)) + " " + epilogue_name(e) + " " +
                           describe_dtypes(op, t, m) + shape_name(s) + (transposed ? " w=[M,K]ᵀ" : " w=[K,M]") +
                           dx_name + (through ? std::string(" through ") + epilogue_name(x_act) : "");
  out.push_back({op, false, name, [=](Backend& b, Outcome& o) {
                   const LinearInputs in = linear_inputs(b, t[3], t[4], s, transposed);
                   const size_t nm = static_cast<size_t>(s.N) * s.M, nk = static_cast<size_t>(s.N) * s.K,
                                km = static_cast<size_t>(s.K) * s.M;
                   Tensor dy(b, t[2], {s.N, s.M}, randn(nm, 20, 0.5f));
                   Tensor dx(b, t[0], {s.N, s.K}, randn(nk, 21, 0.3f));
                   Tensor dw(b, t[1], transposed ? std::vector<std::int64_t>{s.M, s.K} : std::vector<std::int64_t>{s.K, s.M},
                             randn(km, 22, 0.1f));
                   Tensor db(b, t[1], {s.M}, randn(s.M, 23, 0.1f));
                   // The activations' saved tensor: GELU's input, or tanh's output (|·| < 1).
                   std::vector<float> saved = randn(nm, 24);
                   if (e == Epilogue::BiasTanh)
                     for (float& v : saved) v = std::tanh(v);
                   Tensor pre(b, t.size() > 5 ? t[5] : t[2], {s.N, s.M}, saved);
                   std::vector<float> x_saved = randn(nk, 25);
                   if (x_act == Epilogue::BiasTanh)
                     for (float& v : x_saved) v = std::tanh(v);
                   Tensor x_pre(b, t[0], {s.N, s.K}, x_saved);
                   const std::vector<double> dx0 = dx.host(), dw0 = dw.host(), db0 = db.host();
                   LinearBackwardArgs a;
                   if (dx_mode != Dx::Absent) a.dx = dx.view();
                   a.dx_accumulate = dx_mode == Dx::Accumulated;
                   a.dw = transposed ? dw.view().t() : dw.view();
                   a.db = db.view();
                   a.dy = dy.view();
                   a.x = in.x.view();
                   a.w = in.wv();
                   a.math = m;
                   a.epilogue = e;
                   if (has_activation(e)) a.pre = pre.view();
                   if (through) {
                     a.x_epilogue = x_act;
                     a.x_pre = x_pre.view();
                   }
                   b.linear_backward(a);
                   // g: dy, or d(pre) = act'(saved)·dy as the products read it.
                   std::vector<double> g(nm);
                   for (size_t i = 0; i < nm; ++i)
                     g[i] = has_activation(e) ? operand(activation_grad(e, pre.host()[i]) * dy.host()[i], m) : dy.host()[i];
                   const double via = has_activation(e) ? ulp(t[2]) + ulp(m) : 0.0;  // d(pre) rounded once
                   std::vector<double> rdx(nk), rdw(km), rdb(s.M);
                   for (int n = 0; n < s.N; ++n)
                     for (int k = 0; k < s.K; ++k) {
                       double acc = dx_mode == Dx::Accumulated ? dx0[static_cast<size_t>(n) * s.K + k] : 0.0;
                       for (int j = 0; j < s.M; ++j)
                         acc += operand(g[static_cast<size_t>(n) * s.M + j], m) * operand(in.wat(k, j), m);
                       const size_t at = static_cast<size_t>(n) * s.K + k;
                       rdx[at] = through ? activation_grad(x_act, x_pre.host()[at]) * acc : acc;
                     }
                   for (int k = 0; k < s.K; ++k)
                     for (int j = 0; j < s.M; ++j) {
                       const size_t at = transposed ? static_cast<size_t>(j) * s.K + k : static_cast<size_t>(k) * s.M + j;
                       double acc = dw0[at];
                       for (int n = 0; n < s.N; ++n)
                         acc += operand(in.x.host()[static_cast<size_t>(n) * s.K + k], m) *
                                operand(g[static_cast<size_t>(n) * s.M + j], m);
                       rdw[at] = acc;
                     }
                   for (int j = 0; j < s.M; ++j) {
                     double acc = db0[j];
                     for (int n = 0; n < s.N; ++n) acc += g[static_cast<size_t>(n) * s.M + j];
                     rdb[j] = acc;
                   }
                   // Through x's activation, dx may be rounded once more, before its derivative.
                   if (dx_mode != Dx::Absent)
                     o.close("dx", dx.read(), rdx, tolerance(t[0], {via, through ? ulp(t[0]) : 0.0}));
                   o.close("dw", dw.read(), rdw, tolerance(t[1], {via}));
                   o.close("db", db.read(), rdb, tolerance(t[1], {via}));
                 }});
}

inline void linear_backward_cases(const Backend& be, std::vector<Case>& out) {
  for (const Epilogue e : {Epilogue::Bias, Epilogue::BiasGelu, Epilogue::BiasGeluErf, Epilogue::BiasTanh}) {
    const Op op = has_activation(e) ? Op::LinearActivationBackward : Op::LinearBackward;
    for (const auto& t : type_tuples(op_tensors(op).size()))
      for (const ComputeType m : kMaths) {
        if (!asks(be, op, t, m, {{"db", t[1]}})) continue;
        const bool uniform = std::all_of(t.begin(), t.end(), [&](StorageType s) { return s == t[0]; });
        const std::vector<ComputeType> natural = natural_maths(t[0]);
        const bool classes = uniform && std::find(natural.begin(), natural.end(), m) != natural.end();
        for (const bool transposed : {false, true}) {
          linear_backward_case(out, e, t, m, kLinearSweep, transposed, Dx::Written);
          if (t[0] == t[2]) linear_backward_case(out, e, t, m, kLinearSweep, transposed, Dx::Absent);  // dy's type in dx's place
          if (!classes) continue;
          for (const LinearShape& s : kLinearShapes)
            linear_backward_case(out, e, t, m, s, transposed, s.N == 33 ? Dx::Accumulated : Dx::Written);
          // GPT-2's down projection on a GPU: GELU's derivative in the dx product (the fused
          // epilogue where K % 8 == 0, the activation's kernel at K = 36).
          if (e != Epilogue::Bias) continue;
          for (const Epilogue x_act : {Epilogue::BiasGelu, Epilogue::BiasGeluErf})
            for (const LinearShape& s : {kLinearShapes[1], LinearShape{33, 36, 65}})
              linear_backward_case(out, e, t, m, s, transposed, Dx::Written, x_act);
        }
      }
  }
}

// --- LayerNorm --------------------------------------------------------------------------------------

// Mean and 1/std of each row of x [N, C] (population variance + eps), in double.
// Row statistics in float64: LayerNorm's mean and 1/sqrt(var + eps), or with rms RMSNorm's (mean 0,
// 1/sqrt(mean(x²) + eps)).
inline void row_stats(const std::vector<double>& x, int N, int C, double eps, std::vector<double>& mean,
                      std::vector<double>& rstd, bool rms = false) {
  mean.assign(N, 0.0);
  rstd.assign(N, 0.0);
  for (int n = 0; n < N; ++n) {
    double s = 0.0, q = 0.0;
    for (int c = 0; c < C; ++c) s += x[static_cast<size_t>(n) * C + c];
    const double mu = rms ? 0.0 : s / C;
    for (int c = 0; c < C; ++c)
      q += (x[static_cast<size_t>(n) * C + c] - mu) * (x[static_cast<size_t>(n) * C + c] - mu);
    mean[n] = mu;
    rstd[n] = 1.0 / std::sqrt(q / C + eps);
  }
}

// LayerNorm and RMSNorm (rms: no mean, no beta; Llama's), forward and backward.
inline void layernorm_cases(const Backend& be, std::vector<Case>& out) {
  struct Shape {
    int N, C;
  };
  const Shape sweep{3, 33}, shapes[] = {{40, 96}, {7, 260}, {2, 1031}};
  const float eps = 1e-5f;
  // The one-storage tuples run the shape classes too.
  const auto shapes_for = [&](const std::vector<StorageType>& t) {
    std::vector<Shape> run = {sweep};
    if (std::all_of(t.begin(), t.end(), [&](StorageType s) { return s == t[0]; }))
      run.insert(run.end(), std::begin(shapes), std::end(shapes));
    return run;
  };
  for (const bool rms : {false, true}) {
    const Op fwd = rms ? Op::RmsNorm : Op::LayerNorm, bwd = rms ? Op::RmsNormBackward : Op::LayerNormBackward;
    // Forward: {out, x, gamma} (beta: gamma's type).
    for (const auto& t : type_tuples(op_tensors(fwd).size())) {
      if (!asks(be, fwd, t)) continue;
      for (const Shape sh : shapes_for(t))
        out.push_back({fwd, false,
                       std::string(backend_op_name(fwd)) + " " + describe_dtypes(fwd, t) +
                           " N=" + std::to_string(sh.N) + " C=" + std::to_string(sh.C),
                       [=](Backend& b, Outcome& o) {
                         const int N = sh.N, C = sh.C;
                         const size_t nc = static_cast<size_t>(N) * C;
                         Tensor x(b, t[1], {N, C}, randn(nc, 30, 2.0f)),
                             gamma(b, t[2], {C}, randn(C, 31, 0.5f)), beta(b, t[2], {C}, randn(C, 32, 0.5f)),
                             y(b, t[0], {N, C}), mean(b, F32, {N}), rstd(b, F32, {N});
                         b.layernorm({y.view(), rms ? View{} : mean.view(), rstd.view(), x.view(),
                                      gamma.view(), rms ? View{} : beta.view(), eps, rms});
                         std::vector<double> mu, rs, ref(nc);
                         row_stats(x.host(), N, C, eps, mu, rs, rms);
                         for (int n = 0; n < N; ++n)
                           for (int c = 0; c < C; ++c)
                             ref[static_cast<size_t>(n) * C + c] =
                                 (x.host()[static_cast<size_t>(n) * C + c] - mu[n]) * rs[n] *
                                     gamma.host()[c] +
                                 (rms ? 0.0 : beta.host()[c]);
                         o.close("out", y.read(), ref, tolerance(t[0]));
                         if (!rms) o.close("mean", mean.read(), mu, tolerance(F32));
                         o.close("rstd", rstd.read(), rs, tolerance(F32));
                       }});
    }
    // Backward: {dx, dgamma, dout, x, gamma} (dbeta: dgamma's type); dx, dgamma, dbeta accumulated.
    for (const auto& t : type_tuples(op_tensors(bwd).size())) {
      if (!asks(be, bwd, t)) continue;
      for (const Shape sh : shapes_for(t))
        out.push_back(
            {bwd, false,
             std::string(backend_op_name(bwd)) + " " + describe_dtypes(bwd, t) +
                 " N=" + std::to_string(sh.N) + " C=" + std::to_string(sh.C),
             [=](Backend& b, Outcome& o) {
               const int N = sh.N, C = sh.C;
               const size_t nc = static_cast<size_t>(N) * C;
               Tensor x(b, t[3], {N, C}, randn(nc, 40, 2.0f)), gamma(b, t[4], {C}, randn(C, 41, 0.5f));
               std::vector<double> mu, rs;
               row_stats(x.host(), N, C, eps, mu, rs, rms);
               Tensor mean(b, F32, {N}, std::vector<float>(mu.begin(), mu.end())),
                   rstd(b, F32, {N}, std::vector<float>(rs.begin(), rs.end()));
               Tensor dout(b, t[2], {N, C}, randn(nc, 42)), dx(b, t[0], {N, C}, randn(nc, 43, 0.2f)),
                   dg(b, t[1], {C}, randn(C, 44, 0.2f)), dbeta(b, t[1], {C}, randn(C, 45, 0.2f));
               const std::vector<double> dx0 = dx.host(), dg0 = dg.host(), db0 = dbeta.host();
               b.layernorm_backward({dx.view(), dg.view(), rms ? View{} : dbeta.view(), dout.view(), x.view(),
                                     gamma.view(), rms ? View{} : mean.view(), rstd.view(), rms});
               std::vector<double> rdx = dx0, rdg = dg0, rdb = db0;
               for (int n = 0; n < N; ++n) {
                 const double m = mean.host()[n], s = rstd.host()[n];
                 double a = 0.0, q = 0.0;  // mean of γ·dout and of γ·dout·x̂
                 for (int c = 0; c < C; ++c) {
                   const size_t i = static_cast<size_t>(n) * C + c;
                   const double xh = (x.host()[i] - m) * s, gd = gamma.host()[c] * dout.host()[i];
                   a += gd, q += gd * xh;
                   rdg[c] += dout.host()[i] * xh;
                   rdb[c] += dout.host()[i];
                 }
                 a = rms ? 0.0 : a / C, q /= C;  // RMSNorm subtracted no mean
                 for (int c = 0; c < C; ++c) {
                   const size_t i = static_cast<size_t>(n) * C + c;
                   const double xh = (x.host()[i] - m) * s;
                   rdx[i] += s * (gamma.host()[c] * dout.host()[i] - a - xh * q);
                 }
               }
               o.close("dx", dx.read(), rdx, tolerance(t[0]));
               o.close("dgamma", dg.read(), rdg, tolerance(t[1]));
               if (!rms) o.close("dbeta", dbeta.read(), rdb, tolerance(t[1]));
             }});
    }
  }
}

// --- attention ---------------------------------------------------------------------------------------

enum class Layout { Causal, Masked, Packed };
inline const char* layout_name(Layout l) { return l == Layout::Causal ? "causal" : l == Layout::Masked ? "masked" : "packed"; }

struct AttentionShape {
  int B, T, NH, HS;
  int KV = 0;  // key/value heads (grouped-query attention); 0: NH
};

// The sequences of a layout: (first row, length, real keys) — padded rows of T (the masked
// layout pads the last sequence's final 3 keys), or packed lengths T, T-4, 5, ... each ≤ T.
struct Sequences {
  std::vector<int> first, len, real, cu, key_mask;
  int rows = 0;
};
inline Sequences sequences_of(Layout l, int B, int T) {
  Sequences q;
  q.cu.push_back(0);
  for (int b = 0; b < B; ++b) {
    const int len = l == Layout::Packed ? std::max(1, T - 4 * b) : T;
    q.first.push_back(q.rows);
    q.len.push_back(len);
    q.real.push_back(l == Layout::Masked && b == B - 1 ? T - 3 : len);
    q.rows += len;
    q.cu.push_back(q.rows);
    for (int t = 0; t < len && l != Layout::Packed; ++t) q.key_mask.push_back(t < q.real.back() ? 1 : 0);
  }
  return q;
}

inline void attention_case(std::vector<Case>& out, const AttentionDtypes& ty, AttentionShape s, Layout l) {
  const std::string name =
      std::string("attention+backward ") + layout_name(l) + " " +
      describe_dtypes(Op::Attention, {ty.qkv, ty.out, ty.probs}) + " scores=" + compute_name(ty.scores) +
      " values=" + compute_name(ty.values) + " B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) +
      " NH=" + std::to_string(s.NH) + " HS=" + std::to_string(s.HS) + (s.KV ? " KV=" + std::to_string(s.KV) : "");
  out.push_back({Op::Attention, false, name, [=](Backend& b, Outcome& o) {
                   // Grouped-query heads: qkv rows of W = (NH + 2·KV)·HS, query head h reading key/value
                   // head h / G (G = NH / KV).
                   const int C = s.NH * s.HS, T = s.T, KV = s.KV ? s.KV : s.NH, G = s.NH / KV;
                   const int W = C + 2 * KV * s.HS;
                   const Sequences q = sequences_of(l, s.B, T);
                   const size_t rows = static_cast<size_t>(q.rows);
                   Tensor qkv(b, ty.qkv, {q.rows, W}, randn(rows * W, 50));
                   Tensor y(b, ty.out, {q.rows, C}), dout(b, ty.out, {q.rows, C}, randn(rows * C, 51));
                   Tensor dqkv(b, ty.qkv, {q.rows, W});
                   Ids mask(b, q.key_mask), cu(b, q.cu);
                   const View cu_p = l == Layout::Packed ? cu.view() : View{};
                   const int memory_b = attention_memory_batch(s.B, T, q.rows, !cu_p.empty());
                   const AttentionBytes need = b.attention_bytes(memory_b, T, C, s.NH, ty);
                   Tensor saved(b, F32, {static_cast<std::int64_t>(need.saved / 4 + 1)});
                   Tensor scratch(b, F32, {static_cast<std::int64_t>(need.scratch / 4 + 1)});
                   AttentionArgs a;
                   a.out = y.view();
                   a.qkv = qkv.view();
                   a.saved = saved.view();
                   a.scratch = scratch.view();
                   a.B = s.B, a.T = T, a.NH = s.NH;
                   a.types = ty;
                   a.causal = l == Layout::Causal;
                   a.key_mask = l == Layout::Masked ? mask.view() : View{};
                   a.cu_seqlens = cu_p;
                   a.kv_heads = s.KV;
                   b.attention(a);
                   AttentionBackwardArgs g;
                   g.dqkv = dqkv.view();
                   g.dout = dout.view();
                   g.out = y.view();
                   g.qkv = qkv.view();
                   g.saved = saved.view();
                   g.scratch = scratch.view();
                   g.B = s.B, g.T = T, g.NH = s.NH;
                   g.types = ty;
                   g.causal = a.causal;
                   g.cu_seqlens = cu_p;
                   g.kv_heads = s.KV;
                   b.attention_backward(g);
                   // The reference, sequence by sequence and head by head, on the rounded inputs.
                   const double scale = 1.0 / std::sqrt(static_cast<double>(s.HS));
                   // Where head h's part (0 q, 1 k, 2 v) starts in a row.
                   const auto offset = [&](int part, int h) {
                     return part == 0 ? static_cast<size_t>(h) * s.HS
                                      : static_cast<size_t>(C) + static_cast<size_t>(part - 1) * KV * s.HS +
                                            static_cast<size_t>(h / G) * s.HS;
                   };
                   const auto at = [&](int row, int part, int h, int d) {
                     return qkv.host()[static_cast<size_t>(row) * W + offset(part, h) + d];
                   };
                   std::vector<double> ry(rows * C, 0.0), rdq(rows * W, 0.0);
                   for (size_t sq = 0; sq < q.first.size(); ++sq)
                     for (int h = 0; h < s.NH; ++h) {
                       const int f = q.first[sq], L = q.len[sq];
                       std::vector<double> P(static_cast<size_t>(L) * L, 0.0), dS(static_cast<size_t>(L) * L, 0.0);
                       for (int i = 0; i < L; ++i) {
                         const int keys = l == Layout::Causal ? i + 1 : q.real[sq];
                         double mx = -1e300;
                         std::vector<double> sc(keys);
                         for (int j = 0; j < keys; ++j) {
                           double d = 0.0;
                           for (int k = 0; k < s.HS; ++k)
                             d += operand(at(f + i, 0, h, k), ty.scores) * operand(at(f + j, 1, h, k), ty.scores);
                           sc[j] = d * scale;
                           mx = std::max(mx, sc[j]);
                         }
                         double sum = 0.0;
                         for (int j = 0; j < keys; ++j) sum += std::exp(sc[j] - mx);
                         for (int j = 0; j < keys; ++j)
                           P[static_cast<size_t>(i) * L + j] = stored(std::exp(sc[j] - mx) / sum, ty.probs);
                         for (int k = 0; k < s.HS; ++k) {
                           double acc = 0.0;
                           for (int j = 0; j < keys; ++j)
                             acc += operand(P[static_cast<size_t>(i) * L + j], ty.values) * operand(at(f + j, 2, h, k), ty.values);
                           ry[static_cast<size_t>(f + i) * C + static_cast<size_t>(h) * s.HS + k] = acc;
                         }
                         // dP = dout·vᵀ; dS = scale·P·(dP − Σ P·dP)
                         std::vector<double> dP(keys);
                         double dot = 0.0;
                         for (int j = 0; j < keys; ++j) {
                           double d = 0.0;
                           for (int k = 0; k < s.HS; ++k)
                             d += operand(dout.host()[static_cast<size_t>(f + i) * C + static_cast<size_t>(h) * s.HS + k], ty.values) *
                                  operand(at(f + j, 2, h, k), ty.values);
                           dP[j] = d;
                           dot += P[static_cast<size_t>(i) * L + j] * d;
                         }
                         for (int j = 0; j < keys; ++j)
                           dS[static_cast<size_t>(i) * L + j] = scale * P[static_cast<size_t>(i) * L + j] * (dP[j] - dot);
                       }
                       for (int i = 0; i < L; ++i)
                         for (int k = 0; k < s.HS; ++k) {
                           double dq = 0.0, dk = 0.0, dv = 0.0;
                           for (int j = 0; j < L; ++j) {
                             dq += dS[static_cast<size_t>(i) * L + j] * operand(at(f + j, 1, h, k), ty.scores);
                             dk += dS[static_cast<size_t>(j) * L + i] * operand(at(f + j, 0, h, k), ty.scores);
                             dv += operand(P[static_cast<size_t>(j) * L + i], ty.values) *
                                   operand(dout.host()[static_cast<size_t>(f + j) * C + static_cast<size_t>(h) * s.HS + k],
                                           ty.values);
                           }
                           const size_t r = static_cast<size_t>(f + i) * W + k;
                           rdq[r + offset(0, h)] = dq;
                           rdq[r + offset(1, h)] += dk;  // a key/value head sums its group's
                           rdq[r + offset(2, h)] += dv;
                         }
                     }
                   // The scores' rounding too: tensor cores round a TF32 product's fp32 operands their
                   // own way (not the CPU's round-to-nearest-even the reference takes), and the scores'
                   // error reaches `out` through the softmax (the H200's padded path missed by 2.3e-4).
                   o.close("out", y.read(), ry, tolerance(ty.out, {ulp(ty.probs), ulp(ty.values), ulp(ty.scores)}));
                   o.close("dqkv", dqkv.read(), rdq,
                           tolerance(ty.qkv, {ulp(ty.probs), ulp(ty.qkv), ulp(ty.scores), ulp(ty.values)}));
                 }});
  out.back().also = static_cast<int>(Op::AttentionBackward);
}

inline void attention_cases(const Backend& be, std::vector<Case>& out) {
  const AttentionShape sweep{2, 9, 2, 8};
  const AttentionShape shapes[] = {{2, 17, 2, 32}, {2, 65, 2, 64}, {2, 33, 2, 128}};
  for (const auto& t : type_tuples(op_tensors(Op::Attention).size()))  // {qkv, out, probs}
    for (const ComputeType scores : kMaths) {
      if (!asks(be, Op::Attention, t, scores) || !asks(be, Op::AttentionBackward, t, scores)) continue;
      // The values' arithmetic (not in supports()' question yet): the scores', and for fp32 storage
      // the other fp32 arithmetic too.
      std::vector<ComputeType> values = {scores};
      if (scores == ComputeType::TF32) values.push_back(ComputeType::F32);
      if (scores == ComputeType::F32 && t[0] == F32) values.push_back(ComputeType::TF32);
      const bool uniform = t[0] == t[1] && t[1] == t[2];
      const std::vector<ComputeType> natural = natural_maths(t[0]);
      const bool classes = uniform && std::find(natural.begin(), natural.end(), scores) != natural.end();
      for (const ComputeType v : values)
        for (const Layout l : {Layout::Causal, Layout::Masked, Layout::Packed}) {
          const AttentionDtypes ty{.qkv = t[0], .probs = t[2], .out = t[1], .scores = scores, .values = v};
          attention_case(out, ty, sweep, l);
          if (classes && v == scores) {
            for (const AttentionShape& s : shapes) attention_case(out, ty, s, l);
            // Grouped-query heads (Llama's): two groups of two, and multi-query.
            if (l == Layout::Causal)
              for (const int kv : {2, 1}) attention_case(out, ty, {2, 17, 4, 32, kv}, l);
          }
        }
    }
}

}  // namespace mptrain::conformance
