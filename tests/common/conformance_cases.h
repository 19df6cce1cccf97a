// The conformance cases of the step's other ops (tests/common/conformance.h): the fused loss and
// Sophia's sampled form, the embeddings, BERT's row ops, the optimizer's kernels, Muon's matmul and
// elementwise halves; and all_cases(), the whole list for a backend.
#pragma once
#include <numbers>
#include <set>

#include "common/conformance_blocks.h"
#include "common/fp8_reference.h"

namespace mptrain::conformance {

// --- the fused loss -----------------------------------------------------------------------------------

inline void cross_entropy_cases(const Backend& be, std::vector<Case>& out) {
  struct Shape {
    int N, V, Vp;
  };
  const Shape shapes[] = {{7, 33, 40}, {5, 257, 264}};
  for (const bool sampled : {false, true})
    for (const auto& t : type_tuples(op_tensors(Op::CrossEntropy).size())) {
      const Op op = sampled ? Op::SampledCrossEntropy : Op::CrossEntropy;
      if (!asks(be, op, t)) continue;
      // dlogits apart, in place (logits' own dtype), or none (the loss only; dlogits' place holds
      // logits' type). The sampled loss always writes dlogits.
      std::vector<int> forms = {0};
      if (t[0] == t[1]) forms.insert(forms.end(), {1, sampled ? 0 : 2});
      for (const int form : std::set<int>(forms.begin(), forms.end()))
        for (const Shape sh : shapes)
          out.push_back({op, false,
                         std::string(backend_op_name(op)) + " " + describe_dtypes(op, t) +
                             (form == 1 ? " in place" : form == 2 ? " loss only" : "") + " N=" + std::to_string(sh.N) +
                             " V=" + std::to_string(sh.V) + " Vp=" + std::to_string(sh.Vp),
                         [=](Backend& b, Outcome& o) {
                           const int N = sh.N, V = sh.V, Vp = sh.Vp;
                           const size_t nv = static_cast<size_t>(N) * Vp;
                           Tensor logits(b, t[1], {N, Vp}, randn(nv, 60, 3.0f)), dlogits(b, t[0], {N, Vp});
                           Tensor losses(b, F32, {N}), dloss(b, F32, {N}, randn(N, 61, 0.3f));
                           std::vector<int> targets(N);
                           for (int n = 0; n < N; ++n) targets[n] = n == 2 ? -1 : (n * 37 + 5) % V;  // one ignored row
                           Ids tg(b, targets), drawn(b, std::vector<int>(N, -7));
                           const std::vector<double> lv = logits.host();
                           CrossEntropyArgs a;
                           a.losses = losses.view();
                           if (form == 0) a.dlogits = dlogits.view();
                           if (form == 1) a.dlogits = logits.view();
                           a.logits = logits.view();
                           a.targets = ints(tg);
                           if (form != 2) a.dloss = dloss.view();
                           a.vocab = V;
                           if (sampled) a.sampled = drawn.view(), a.seed = 3, a.counter = 9;
                           b.cross_entropy(a);
                           std::vector<int> labels = targets;
                           if (sampled) {
                             drawn.buf.download(labels.data(), N);
                             for (int n = 0; n < N; ++n)
                               if (labels[n] < 0 || labels[n] >= V)
                                 o.misses.push_back("sampled label " + std::to_string(labels[n]) + " of row " +
                                                    std::to_string(n) + " outside [0, " + std::to_string(V) + ")");
                             if (!o.misses.empty()) return;
                           }
                           std::vector<double> rl(N, 0.0), rd(nv, 0.0);
                           for (int n = 0; n < N; ++n) {
                             if (labels[n] < 0) continue;
                             const double* row = lv.data() + static_cast<size_t>(n) * Vp;
                             const double mx = *std::max_element(row, row + V);
                             double sum = 0.0;
                             for (int v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
                             rl[n] = mx + std::log(sum) - row[labels[n]];
                             for (int v = 0; v < V; ++v)
                               rd[static_cast<size_t>(n) * Vp + v] =
                                   dloss.host()[n] * (std::exp(row[v] - mx) / sum - (v == labels[n] ? 1.0 : 0.0));
                           }
                           o.close("losses", losses.read(), rl, tolerance(F32));
                           if (form == 0) o.close("dlogits", dlogits.read(), rd, tolerance(t[0]));
                           if (form == 1) o.close("dlogits (in place)", logits.read(), rd, tolerance(t[0]));
                         }});
    }
}

// --- embeddings ---------------------------------------------------------------------------------------

inline void embedding_cases(const Backend& be, std::vector<Case>& out) {
  enum class Kind { Gpt2, Bert, Packed, Llama };  // Llama: the token rows alone, no positions
  for (const bool backward : {false, true})
    for (const auto& t : type_tuples(op_tensors(Op::Embedding).size())) {
      const Op op = backward ? Op::EmbeddingBackward : Op::Embedding;
      if (!asks(be, op, t)) continue;
      for (const Kind kind : {Kind::Gpt2, Kind::Bert, Kind::Packed, Kind::Llama})
        for (const int C : {8, 33})
          out.push_back(
              {op, false,
               std::string(backend_op_name(op)) + " " +
                   describe_dtypes(op, t) +
                   (kind == Kind::Gpt2 ? " gpt2" : kind == Kind::Bert ? " bert" : kind == Kind::Llama ? " llama" : " bert packed") + " C=" + std::to_string(C),
               [=](Backend& b, Outcome& o) {
                 const int B = 3, T = 5, V = 11, P = T + 2;
                 const Sequences q = sequences_of(kind == Kind::Packed ? Layout::Packed : Layout::Masked, B, T);
                 const int rows = kind == Kind::Packed ? q.rows : B * T;
                 std::vector<int> tokens(rows), types(rows), pos(rows);
                 for (int r = 0; r < rows; ++r) tokens[r] = (r * 7 + 3) % V, types[r] = (r / 2) % 2;
                 for (int sq = 0, r = 0; sq < B; ++sq)
                   for (int i = 0; i < (kind == Kind::Packed ? q.len[sq] : T); ++i) pos[r++] = i;
                 const bool bert = kind == Kind::Bert || kind == Kind::Packed, positions = kind != Kind::Llama;
                 Ids tok(b, tokens), typ(b, types), cu(b, q.cu);
                 const StorageType table_t = backward ? t[0] : t[1], act_t = backward ? t[1] : t[0];
                 Tensor word(b, table_t, {V, C}, randn(static_cast<size_t>(V) * C, 70, backward ? 0.1f : 1.0f));
                 Tensor wpe(b, table_t, {P, C}, randn(static_cast<size_t>(P) * C, 71, backward ? 0.1f : 1.0f));
                 Tensor wtt(b, table_t, {2, C}, randn(2 * static_cast<size_t>(C), 72, backward ? 0.1f : 1.0f));
                 Tensor act(b, act_t, {rows, C}, backward ? randn(static_cast<size_t>(rows) * C, 73) : std::vector<float>{});
                 const int pad = bert ? tokens[1] : -1;  // BERT's [PAD] row takes no gradient
                 const std::vector<double> w0 = word.host(), p0 = wpe.host(), t0 = wtt.host();
                 if (!backward) {
                   EmbeddingArgs a;
                   a.out = act.view();
                   a.tokens = ints(tok);
                   a.B = B, a.T = T;
                   a.cu_seqlens = kind == Kind::Packed ? cu.view() : View{};
                   a.word = word.view();
                   if (positions) a.pos = wpe.view();
                   if (bert) a.types = typ.view(), a.type_table = wtt.view();
                   b.embedding(a);
                   std::vector<double> ref(static_cast<size_t>(rows) * C);
                   for (int r = 0; r < rows; ++r)
                     for (int c = 0; c < C; ++c)
                       ref[static_cast<size_t>(r) * C + c] = w0[static_cast<size_t>(tokens[r]) * C + c] +
                                                             (positions ? p0[static_cast<size_t>(pos[r]) * C + c] : 0.0) +
                                                             (bert ? t0[static_cast<size_t>(types[r]) * C + c] : 0.0);
                   o.close("out", act.read(), ref, tolerance(act_t));
                   return;
                 }
                 EmbeddingBackwardArgs a;
                 a.dword = word.view();
                 if (positions) a.dpos = wpe.view();
                 a.dout = act.view();
                 a.tokens = ints(tok);
                 a.B = B, a.T = T;
                 a.cu_seqlens = kind == Kind::Packed ? cu.view() : View{};
                 if (bert) a.types = typ.view(), a.dtype = wtt.view(), a.pad_token = pad;
                 b.embedding_backward(a);
                 std::vector<double> rw = w0, rp = p0, rt = t0;
                 for (int r = 0; r < rows; ++r)
                   for (int c = 0; c < C; ++c) {
                     const double d = act.host()[static_cast<size_t>(r) * C + c];
                     if (tokens[r] != pad) rw[static_cast<size_t>(tokens[r]) * C + c] += d;
                     rp[static_cast<size_t>(pos[r]) * C + c] += d;
                     rt[static_cast<size_t>(types[r]) * C + c] += d;
                   }
                 o.close("dword", word.read(), rw, tolerance(table_t));
                 o.close("dpos", wpe.read(), positions ? rp : p0, tolerance(table_t));  // untouched without
                 if (bert) o.close("dtype", wtt.read(), rt, tolerance(table_t));
               }});
    }
}

// --- rows ---------------------------------------------------------------------------------------------

inline void rows_cases(const Backend& be, std::vector<Case>& out) {
  const std::vector<int> picks = {8, 0, 5, 3};  // distinct rows of a 9-row tensor
  for (const auto& t : type_tuples(op_tensors(Op::GatherRows).size()))
    for (const int C : {8, 33}) {
      const std::string shape = " rows=9 count=4 C=" + std::to_string(C);
      if (asks(be, Op::GatherRows, t))
        out.push_back({Op::GatherRows, false, "gather_rows " + describe_dtypes(Op::GatherRows, t) + shape,
                       [=](Backend& b, Outcome& o) {
                         Tensor src(b, t[1], {9, C}, randn(9 * static_cast<size_t>(C), 80)), dst(b, t[0], {6, C},
                                                                                                    randn(6 * static_cast<size_t>(C), 81));
                         Ids rows(b, picks);
                         b.gather_rows(dst.view(), src.view(), rows.view());
                         std::vector<double> ref(6 * static_cast<size_t>(C), 0.0);  // rows past count: 0
                         for (int r = 0; r < 4; ++r)
                           for (int c = 0; c < C; ++c)
                             ref[static_cast<size_t>(r) * C + c] = stored(src.host()[static_cast<size_t>(picks[r]) * C + c], t[0]);
                         o.close("dst", dst.read(), ref, 0.0);
                       }});
      if (asks(be, Op::ScatterAddRows, t))
        out.push_back({Op::ScatterAddRows, false, "scatter_add_rows " + describe_dtypes(Op::ScatterAddRows, t) + shape,
                       [=](Backend& b, Outcome& o) {
                         Tensor dst(b, t[0], {9, C}, randn(9 * static_cast<size_t>(C), 82)), src(b, t[1], {4, C},
                                                                                                    randn(4 * static_cast<size_t>(C), 83));
                         Ids rows(b, picks);
                         const std::vector<double> d0 = dst.host();
                         b.scatter_add_rows(dst.view(), src.view(), rows.view());
                         std::vector<double> ref = d0;
                         for (int r = 0; r < 4; ++r)
                           for (int c = 0; c < C; ++c) {
                             double& x = ref[static_cast<size_t>(picks[r]) * C + c];
                             x = stored(static_cast<float>(x) + static_cast<float>(src.host()[static_cast<size_t>(r) * C + c]), t[0]);
                           }
                         o.close("dst", dst.read(), ref, 0.0);
                       }});
    }
  for (const StorageType t : kStorages) {
    if (!asks(be, Op::ArgmaxRows, {t})) continue;
    for (const int n : {2, 33, 300})
      out.push_back({Op::ArgmaxRows, false, std::string("argmax_rows x=") + storage_name(t) + " n=" + std::to_string(n),
                     [=](Backend& b, Outcome& o) {
                       const int R = 5, stride = n + 3;
                       std::vector<float> v = randn(static_cast<size_t>(R) * stride, 84);
                       for (int r = 0; r < R; ++r) v[static_cast<size_t>(r) * stride + n] = 100.0f;  // past n: ignored
                       Tensor x(b, t, {R, stride}, v);
                       Ids best(b, std::vector<int>(R, -1));
                       b.argmax_rows(best.view(), x.view(), n);
                       std::vector<int> got(R);
                       best.buf.download(got.data(), R);
                       for (int r = 0; r < R; ++r) {
                         const double* row = x.host().data() + static_cast<size_t>(r) * stride;
                         const int want = static_cast<int>(std::max_element(row, row + n) - row);
                         if (got[r] != want)
                           o.misses.push_back("row " + std::to_string(r) + ": " + std::to_string(got[r]) + ", expected " +
                                              std::to_string(want));
                       }
                     }});
  }
}

// --- the optimizer's kernels (fp32 by the interface's contract) ----------------------------------------

inline void optimizer_cases(const Backend& be, std::vector<Case>& out) {
  const int sizes[] = {1, 33, 1031, 4099};
  for (const int n : sizes) {
    const std::string shape = " n=" + std::to_string(n);
    for (const bool masked : {false, true}) {
      // With a copy: the updated weights also as the operand of GEMMs in `cm`, the bits to_operand gives.
      for (const ComputeType cm : {ComputeType::F32, ComputeType::BF16, ComputeType::F16, ComputeType::TF32}) {
      const bool copied = cm != ComputeType::F32;
      const StorageType ct = be.operand_storage(cm);
      if (copied && !masked) continue;
      if (asks(be, Op::AdamW, {F32, F32, F32, F32}, cm, copied ? std::initializer_list<std::pair<const char*, StorageType>>{{"copy", ct}}
                                                           : std::initializer_list<std::pair<const char*, StorageType>>{}))
        out.push_back({Op::AdamW, false, std::string("adamw") + (masked ? " decay mask" : "") +
                                             (copied ? std::string(" copy ") + storage_name(ct) + " for " + compute_name(cm) : "") + shape,
                       [=](Backend& b, Outcome& o) {
                         Tensor p(b, F32, {n}, randn(n, 90)), g(b, F32, {n}, randn(n, 91, 0.1f)), m(b, F32, {n}, randn(n, 92, 0.01f));
                         std::vector<float> v0(n);
                         for (int i = 0; i < n; ++i) v0[i] = 1e-3f * (1.0f + std::fabs(randn(1, 93 + i)[0]));
                         Tensor v(b, F32, {n}, v0);
                         const std::vector<std::uint32_t> bits = decay_mask_bits(n, {{0, static_cast<size_t>(n) / 2}});
                         Buffer<std::uint32_t> mask(bits.size(), b.memory());
                         mask.upload(bits.data(), bits.size());
                         AdamWArgs a{p.view(), g.view(), m.view(), v.view(), 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.5f,
                                     masked ? View::of(mask.data(), I32, {static_cast<std::int64_t>(bits.size())}) : View{}};
                         Tensor copy(b, ct, {n});
                         if (copied) a.copy = copy.view(), a.math = cm;
                         b.adamw(a);
                         if (copied) {  // exactly the new weights as the products read them
                           std::vector<double> want = p.read();
                           for (double& w : want) w = operand(w, cm);
                           o.close("copy", copy.read(), want, 0.0);
                         }
                         std::vector<double> rp(n), rm(n), rv(n);
                         const double bc1 = 1.0 - std::pow(0.9, 3.0), bc2 = 1.0 - std::pow(0.95, 3.0);
                         for (int i = 0; i < n; ++i) {
                           const double gi = g.host()[i] * 0.5;
                           rm[i] = 0.9 * m.host()[i] + 0.1 * gi;
                           rv[i] = 0.95 * v.host()[i] + 0.05 * gi * gi;
                           const bool decays = !masked || i < n / 2;
                           rp[i] = p.host()[i] * (decays ? 1.0 - 3e-3 * 0.1 : 1.0) -
                                   3e-3 / bc1 * rm[i] / (std::sqrt(rv[i]) / std::sqrt(bc2) + 1e-8);
                         }
                         o.close("params", p.read(), rp, tolerance(F32));
                         o.close("m", m.read(), rm, tolerance(F32));
                         o.close("v", v.read(), rv, tolerance(F32));
                       }});
      }
      if (asks(be, Op::Sophia, {F32, F32, F32, F32}))
        out.push_back({Op::Sophia, false, std::string("sophia") + (masked ? " decay mask" : "") + shape, [=](Backend& b, Outcome& o) {
                         Tensor p(b, F32, {n}, randn(n, 100)), g(b, F32, {n}, randn(n, 101, 0.1f)), m(b, F32, {n}, randn(n, 102, 0.01f));
                         std::vector<float> h0(n);
                         for (int i = 0; i < n; ++i) h0[i] = std::fabs(randn(1, 103 + i)[0]);
                         Tensor h(b, F32, {n}, h0);
                         const std::vector<std::uint32_t> bits = decay_mask_bits(n, {{0, static_cast<size_t>(n) / 2}});
                         Buffer<std::uint32_t> mask(bits.size(), b.memory());
                         mask.upload(bits.data(), bits.size());
                         SophiaArgs a{p.view(), g.view(), m.view(), h.view(), 1e-3f, 0.965f, 0.5f, 0.1f, 2.0f,
                                      masked ? View::of(mask.data(), I32, {static_cast<std::int64_t>(bits.size())}) : View{}};
                         b.sophia(a);
                         std::vector<double> rp(n), rm(n);
                         for (int i = 0; i < n; ++i) {
                           rm[i] = 0.965 * m.host()[i] + 0.035 * g.host()[i] * 2.0;
                           const bool decays = !masked || i < n / 2;
                           const double ratio = std::min(std::fabs(rm[i]) / (0.5 * h.host()[i] + 1e-15), 1.0);
                           rp[i] = p.host()[i] * (decays ? 1.0 - 1e-3 * 0.1 : 1.0) - 1e-3 * (rm[i] > 0 ? 1.0 : rm[i] < 0 ? -1.0 : 0.0) * ratio;
                         }
                         o.close("params", p.read(), rp, tolerance(F32));
                         o.close("m", m.read(), rm, tolerance(F32));
                       }});
    }
    if (asks(be, Op::SophiaHessian, {F32, F32}))
      out.push_back({Op::SophiaHessian, false, "sophia_hessian" + shape, [=](Backend& b, Outcome& o) {
                       Tensor h(b, F32, {n}, randn(n, 110)), gh(b, F32, {n}, randn(n, 111));
                       const std::vector<double> h0 = h.host();
                       b.sophia_hessian(h.view(), gh.view(), 0.99f);
                       std::vector<double> ref(n);
                       for (int i = 0; i < n; ++i) ref[i] = 0.99 * h0[i] + 0.01 * gh.host()[i] * gh.host()[i];
                       o.close("h", h.read(), ref, tolerance(F32));
                     }});
    if (asks(be, Op::CountUnclipped, {F32, F32}))
      out.push_back({Op::CountUnclipped, false, "count_unclipped" + shape, [=](Backend& b, Outcome& o) {
                       Tensor m(b, F32, {n}, randn(n, 120)), h(b, F32, {n}, randn(n, 121));
                       const std::int64_t got = b.count_unclipped(m.view(), h.view(), 0.7f);
                       std::int64_t want = 0;
                       for (int i = 0; i < n; ++i)
                         want += std::fabs(static_cast<float>(m.host()[i])) < 0.7f * static_cast<float>(h.host()[i]) ? 1 : 0;
                       if (got != want) o.misses.push_back(std::to_string(got) + " unclipped, expected " + std::to_string(want));
                     }});
    for (const bool bad : {false, true})
      if (asks(be, Op::UnscaleCheck, {F32}))
        out.push_back({Op::UnscaleCheck, false, std::string("unscale_and_check") + (bad ? " with an inf" : "") + shape,
                       [=](Backend& b, Outcome& o) {
                         std::vector<float> v = randn(n, 130, 1000.0f);
                         if (bad) v[n - 1] = INFINITY;
                         Tensor g(b, F32, {n}, v);
                         const float inv = static_cast<float>(1.0 / 3000.0);  // an inexact reciprocal
                         const bool found = b.unscale_and_check(g.view(), inv);
                         if (found != bad) o.misses.push_back(std::string("found_inf ") + (found ? "true" : "false"));
                         std::vector<double> ref(n);
                         for (int i = 0; i < n; ++i) ref[i] = static_cast<float>(g.host()[i]) * inv;
                         if (!bad) o.close("grads", g.read(), ref, 0.0);
                       }});
    if (asks(be, Op::SumSquares, {F32}))
      out.push_back({Op::SumSquares, false, "sum_squares" + shape, [=](Backend& b, Outcome& o) {
                       Tensor x(b, F32, {n}, randn(n, 140));
                       double want = 0.0;
                       for (const double v : x.host()) want += v * v;
                       o.close("sum", {b.sum_squares(x.view())}, {want}, 1e-12);
                     }});
    if (asks(be, Op::Amax, {F32}))
      out.push_back({Op::Amax, false, "amax" + shape, [=](Backend& b, Outcome& o) {
                       Tensor x(b, F32, {n}, randn(n, 141, 5.0f));
                       double want = 0.0;
                       for (const double v : x.host()) want = std::max(want, std::fabs(v));
                       o.close("amax", {b.amax(x.view())}, {want}, 0.0);
                     }});
    if (asks(be, Op::Scale, {F32}))
      out.push_back({Op::Scale, false, "scale" + shape, [=](Backend& b, Outcome& o) {
                       Tensor x(b, F32, {n}, randn(n, 150));
                       const std::vector<double> x0 = x.host();
                       b.scale(x.view(), 0.3f);
                       std::vector<double> ref(n);
                       for (int i = 0; i < n; ++i) ref[i] = static_cast<float>(x0[i]) * 0.3f;
                       o.close("x", x.read(), ref, 0.0);
                     }});
  }
}

// --- Muon: matmul and its elementwise halves -----------------------------------------------------------

inline void muon_cases(const Backend& be, std::vector<Case>& out) {
  struct Shape {
    int M, K, N;
  };
  const Shape sweep{5, 8, 9}, shapes[] = {{33, 40, 65}, {64, 64, 64}};
  for (const auto& t : type_tuples(op_tensors(Op::Matmul).size())) {
    if (t[1] != t[2] || (t[0] != t[1] && t[0] != F32)) continue;  // the entry point's contract
    for (const ComputeType m : kMaths) {
      if (!asks(be, Op::Matmul, t, m)) continue;
      const std::vector<ComputeType> natural = natural_maths(t[1]);
      const bool classes = std::find(natural.begin(), natural.end(), m) != natural.end();
      std::vector<Shape> run = {sweep};
      if (classes) run.insert(run.end(), std::begin(shapes), std::end(shapes));
      for (const Shape sh : run)
        for (const bool ta : {false, true})
          for (const bool tb : {false, true})
            for (const bool blas : {false, true})
              out.push_back({Op::Matmul, false,
                             "matmul " + describe_dtypes(Op::Matmul, t, m) + " M=" + std::to_string(sh.M) +
                                 " K=" + std::to_string(sh.K) + " N=" + std::to_string(sh.N) + (ta ? " aᵀ" : "") + (tb ? " bᵀ" : "") +
                                 (blas ? " alpha=-0.5 beta=2" : ""),
                             [=](Backend& b, Outcome& o) {
                               const int M = sh.M, K = sh.K, N = sh.N;
                               Tensor a(b, t[1], ta ? std::vector<std::int64_t>{K, M} : std::vector<std::int64_t>{M, K},
                                        randn(static_cast<size_t>(M) * K, 160, 0.5f));
                               Tensor bb(b, t[2], tb ? std::vector<std::int64_t>{N, K} : std::vector<std::int64_t>{K, N},
                                         randn(static_cast<size_t>(K) * N, 161, 0.5f));
                               Tensor c(b, t[0], {M, N}, randn(static_cast<size_t>(M) * N, 162));
                               const std::vector<double> c0 = c.host();
                               const float alpha = blas ? -0.5f : 1.0f, beta = blas ? 2.0f : 0.0f;
                               b.matmul({c.view(), ta ? a.view().t() : a.view(), tb ? bb.view().t() : bb.view(), alpha, beta, m});
                               std::vector<double> ref(static_cast<size_t>(M) * N);
                               for (int i = 0; i < M; ++i)
                                 for (int j = 0; j < N; ++j) {
                                   double acc = 0.0;
                                   for (int k = 0; k < K; ++k)
                                     acc += operand(a.host()[ta ? static_cast<size_t>(k) * M + i : static_cast<size_t>(i) * K + k], m) *
                                            operand(bb.host()[tb ? static_cast<size_t>(j) * K + k : static_cast<size_t>(k) * N + j], m);
                                   ref[static_cast<size_t>(i) * N + j] = alpha * acc + beta * c0[static_cast<size_t>(i) * N + j];
                                 }
                               o.close("c", c.read(), ref, tolerance(t[0]));
                             }});
    }
  }
  // Momentum and update over a column block of a wider matrix (rows strided), and a dense one.
  for (const int ld_extra : {0, 7}) {
    const int R = 33, W = 20, ld = W + ld_extra;
    const std::string shape = " R=" + std::to_string(R) + " W=" + std::to_string(W) + " ld=" + std::to_string(ld);
    const auto strided = [=](const Tensor& t) {
      View v = t.view();
      v.shape[0] = R, v.shape[1] = W, v.stride[0] = ld, v.stride[1] = 1;
      return v;
    };
    for (const bool nesterov : {false, true})
      if (asks(be, Op::MuonMomentum, {F32, F32, F32}))
        out.push_back({Op::MuonMomentum, false, std::string("muon_momentum") + (nesterov ? " nesterov" : "") + shape,
                       [=](Backend& b, Outcome& o) {
                         Tensor m(b, F32, {R, ld}, randn(static_cast<size_t>(R) * ld, 170)),
                             g(b, F32, {R, ld}, randn(static_cast<size_t>(R) * ld, 171)), u(b, F32, {R, W});
                         const std::vector<double> m0 = m.host();
                         b.muon_momentum({strided(m), strided(g), u.view(), 0.95f, 0.5f, nesterov});
                         std::vector<double> rm = m0, ru(static_cast<size_t>(R) * W);
                         for (int r = 0; r < R; ++r)
                           for (int c = 0; c < W; ++c) {
                             const size_t i = static_cast<size_t>(r) * ld + c;
                             const double gi = g.host()[i] * 0.5;
                             rm[i] = 0.95 * m0[i] + gi;
                             ru[static_cast<size_t>(r) * W + c] = nesterov ? gi + 0.95 * rm[i] : rm[i];
                           }
                         o.close("m", m.read(), rm, tolerance(F32));
                         o.close("u", u.read(), ru, tolerance(F32));
                       }});
    for (const StorageType ot : kStorages)
      if (asks(be, Op::MuonUpdate, {F32, ot}))
        out.push_back({Op::MuonUpdate, false, std::string("muon_update o=") + storage_name(ot) + shape,
                       [=](Backend& b, Outcome& o) {
                         Tensor p(b, F32, {R, ld}, randn(static_cast<size_t>(R) * ld, 180)),
                             oo(b, ot, {R, W}, randn(static_cast<size_t>(R) * W, 181));
                         const std::vector<double> p0 = p.host();
                         b.muon_update({strided(p), oo.view(), 0.02f, 0.1f, 1.5f});
                         std::vector<double> ref = p0;
                         for (int r = 0; r < R; ++r)
                           for (int c = 0; c < W; ++c) {
                             const size_t i = static_cast<size_t>(r) * ld + c;
                             ref[i] = p0[i] * (1.0 - 0.02 * 0.1) - 0.02 * 1.5 * oo.host()[static_cast<size_t>(r) * W + c];
                           }
                         o.close("params", p.read(), ref, tolerance(F32));
                       }});
  }
}

// --- Llama's blocks: rotary embeddings and SwiGLU ------------------------------------------------

// QK-norm: RMSNorm over the heads inside a packed qkv [A, W] (NormRows' [A, G, HS] at stride W,
// from head h0), forward into another qkv, then its backward written in place in a dqkv (what
// Llama's QK-norm does); the columns outside the heads keep their values.
inline void qk_norm_cases(const Backend& be, std::vector<Case>& out) {
  struct Shape {
    int A, W, G, HS, h0;
  };
  const Shape shapes[] = {{5, 8 * 16, 4, 16, 0}, {9, 8 * 16, 2, 16, 4}, {3, 6 * 24, 3, 24, 1}};
  const float eps = 1e-6f;
  const auto heads = [](const View& full, const Shape& sh) {  // [A, G, HS] at stride W from head h0
    View v = full;
    v.ptr = static_cast<char*>(full.ptr) + static_cast<size_t>(sh.h0) * sh.HS * storage_bytes(full.type);
    v.rank = 3;
    v.shape = {sh.A, sh.G, sh.HS, 0};
    v.stride = {sh.W, sh.HS, 1, 0};
    return v;
  };
  for (const StorageType st : kStorages) {
    for (const Shape sh : shapes) {
      const std::string shape = " " + std::string(storage_name(st)) + " heads A=" + std::to_string(sh.A) +
                                " G=" + std::to_string(sh.G) + " HS=" + std::to_string(sh.HS) +
                                " of W=" + std::to_string(sh.W);
      const size_t n = static_cast<size_t>(sh.A) * sh.W;
      const int N = sh.A * sh.G;
      if (asks(be, Op::RmsNorm, {st, st, st}))
        out.push_back({Op::RmsNorm, false, "rmsnorm" + shape, [=](Backend& b, Outcome& o) {
                         Tensor x(b, st, {sh.A, sh.W}, randn(n, 176, 2.0f)),
                             g(b, st, {sh.HS}, randn(sh.HS, 177)), y(b, st, {sh.A, sh.W}, randn(n, 178)),
                             rstd(b, F32, {N});
                         b.layernorm({.out = heads(y.view(), sh),
                                      .rstd = rstd.view(),
                                      .x = heads(x.view(), sh),
                                      .gamma = g.view(),
                                      .eps = eps,
                                      .rms = true});
                         std::vector<double> ref = y.host(), rs(static_cast<size_t>(N));
                         for (int a = 0; a < sh.A; ++a)
                           for (int h = 0; h < sh.G; ++h) {
                             const size_t at = static_cast<size_t>(a) * sh.W + (sh.h0 + h) * sh.HS;
                             double q = 0.0;
                             for (int c = 0; c < sh.HS; ++c) q += x.host()[at + c] * x.host()[at + c];
                             const double s = 1.0 / std::sqrt(q / sh.HS + eps);
                             rs[static_cast<size_t>(a) * sh.G + h] = s;
                             for (int c = 0; c < sh.HS; ++c) ref[at + c] = x.host()[at + c] * s * g.host()[c];
                           }
                         o.close("out", y.read(), ref, tolerance(st));
                         o.close("rstd", rstd.read(), rs, tolerance(F32));
                       }});
      if (asks(be, Op::RmsNormBackward, {st, st, st, st, st}))
        out.push_back(
            {Op::RmsNormBackward, false, "rmsnorm_backward in place" + shape, [=](Backend& b, Outcome& o) {
               Tensor x(b, st, {sh.A, sh.W}, randn(n, 179, 2.0f)), g(b, st, {sh.HS}, randn(sh.HS, 180)),
                   dqkv(b, st, {sh.A, sh.W}, randn(n, 181)), dg(b, st, {sh.HS}, randn(sh.HS, 182, 0.2f));
               std::vector<float> rs(static_cast<size_t>(N));
               for (int a = 0; a < sh.A; ++a)
                 for (int h = 0; h < sh.G; ++h) {
                   const size_t at = static_cast<size_t>(a) * sh.W + (sh.h0 + h) * sh.HS;
                   double q = 0.0;
                   for (int c = 0; c < sh.HS; ++c) q += x.host()[at + c] * x.host()[at + c];
                   rs[static_cast<size_t>(a) * sh.G + h] =
                       static_cast<float>(1.0 / std::sqrt(q / sh.HS + eps));
                 }
               Tensor rstd(b, F32, {N}, rs);
               const View d = heads(dqkv.view(), sh);
               b.layernorm_backward({.dx = d,
                                     .dgamma = dg.view(),
                                     .dout = d,
                                     .x = heads(x.view(), sh),
                                     .gamma = g.view(),
                                     .rstd = rstd.view(),
                                     .rms = true,
                                     .accumulate = false});
               std::vector<double> rdx = dqkv.host(), rdg = dg.host();  // outside the heads: kept
               for (int a = 0; a < sh.A; ++a)
                 for (int h = 0; h < sh.G; ++h) {
                   const size_t at = static_cast<size_t>(a) * sh.W + (sh.h0 + h) * sh.HS;
                   const double s = rstd.host()[static_cast<size_t>(a) * sh.G + h];
                   double q = 0.0;
                   for (int c = 0; c < sh.HS; ++c) {
                     const double xh = x.host()[at + c] * s, dy = dqkv.host()[at + c];
                     q += g.host()[c] * dy * xh;
                     rdg[c] += dy * xh;
                   }
                   q /= sh.HS;
                   for (int c = 0; c < sh.HS; ++c)
                     rdx[at + c] = s * (g.host()[c] * dqkv.host()[at + c] - x.host()[at + c] * s * q);
                 }
               o.close("dx", dqkv.read(), rdx, tolerance(st));
               o.close("dgamma", dg.read(), rdg, tolerance(st));
             }});
    }
  }
}

inline void llama_cases(const Backend& be, std::vector<Case>& out) {
  // Rope: in place on the first `heads` heads of rows [rows, W]; forward then the inverse, each
  // against float64 (cos and sin of the fp32 angle transformers computes).
  struct RopeShape {
    int rows, T, W, heads, hs;
  };
  const RopeShape rope_shapes[] = {{6, 3, 40, 3, 8}, {130, 65, 3 * 64, 2, 64}, {8, 8, 6 * 36, 4, 36}};
  for (const auto& t : type_tuples(op_tensors(Op::Rope).size())) {
    if (!asks(be, Op::Rope, t)) continue;
    for (const RopeShape sh : rope_shapes)
      for (const bool inverse : {false, true})
        out.push_back({Op::Rope, false,
                       std::string("rope ") + (inverse ? "inverse " : "") + describe_dtypes(Op::Rope, t) +
                           " rows=" + std::to_string(sh.rows) + " T=" + std::to_string(sh.T) +
                           " hs=" + std::to_string(sh.hs),
                       [=](Backend& b, Outcome& o) {
                         const size_t n = static_cast<size_t>(sh.rows) * sh.W;
                         Tensor x(b, t[0], {sh.rows, sh.W}, randn(n, 160, 1.5f));
                         const std::vector<double> x0 = x.host();
                         const float theta = 500.0f;
                         b.rope({x.view(), sh.T, sh.heads, sh.hs, theta, inverse});
                         std::vector<double> ref = x0;
                         const int half = sh.hs / 2;
                         for (int r = 0; r < sh.rows; ++r)
                           for (int h = 0; h < sh.heads; ++h)
                             for (int i = 0; i < half; ++i) {
                               const float inv_freq =
                                   1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(sh.hs));
                               const double angle = static_cast<float>(r % sh.T) * inv_freq;
                               const double c = std::cos(angle), sn = (inverse ? -1 : 1) * std::sin(angle);
                               const size_t at = static_cast<size_t>(r) * sh.W + static_cast<size_t>(h) * sh.hs + i;
                               ref[at] = x0[at] * c - x0[at + half] * sn;
                               ref[at + half] = x0[at + half] * c + x0[at] * sn;
                             }
                         o.close("x", x.read(), ref, tolerance(t[0]));
                       }});
  }
  // SwiGLU: {out, gate_up} and {dgate_up, dout, gate_up}, one storage each.
  struct Shape {
    int N, I;
  };
  const Shape shapes[] = {{3, 33}, {17, 128}, {5, 260}};
  const auto silu = [](double g) { return g / (1.0 + std::exp(-g)); };
  for (const StorageType st : kStorages) {
    for (const Shape sh : shapes) {
      const std::string shape = " " + std::string(storage_name(st)) + " N=" + std::to_string(sh.N) +
                                " I=" + std::to_string(sh.I);
      const size_t n = static_cast<size_t>(sh.N) * sh.I;
      if (asks(be, Op::Swiglu, {st, st}))
        out.push_back({Op::Swiglu, false, "swiglu" + shape, [=](Backend& b, Outcome& o) {
                         Tensor gu(b, st, {sh.N, 2 * sh.I}, randn(2 * n, 170, 3.0f)), y(b, st, {sh.N, sh.I});
                         b.swiglu({y.view(), gu.view()});
                         std::vector<double> ref(n);
                         for (int r = 0; r < sh.N; ++r)
                           for (int c = 0; c < sh.I; ++c) {
                             const size_t at = static_cast<size_t>(r) * 2 * sh.I + c;
                             ref[static_cast<size_t>(r) * sh.I + c] = silu(gu.host()[at]) * gu.host()[at + sh.I];
                           }
                         o.close("out", y.read(), ref, tolerance(st));
                       }});
      if (asks(be, Op::SwigluBackward, {st, st, st}))
        out.push_back({Op::SwigluBackward, false, "swiglu_backward" + shape, [=](Backend& b, Outcome& o) {
                         Tensor gu(b, st, {sh.N, 2 * sh.I}, randn(2 * n, 171, 3.0f)),
                             dy(b, st, {sh.N, sh.I}, randn(n, 172)), dgu(b, st, {sh.N, 2 * sh.I});
                         b.swiglu_backward({dgu.view(), dy.view(), gu.view()});
                         std::vector<double> ref(2 * n);
                         for (int r = 0; r < sh.N; ++r)
                           for (int c = 0; c < sh.I; ++c) {
                             const size_t at = static_cast<size_t>(r) * 2 * sh.I + c;
                             const double g = gu.host()[at], u = gu.host()[at + sh.I];
                             const double d = dy.host()[static_cast<size_t>(r) * sh.I + c];
                             const double sg = 1.0 / (1.0 + std::exp(-g));
                             ref[at] = d * u * sg * (1.0 + g * (1.0 - sg));
                             ref[at + sh.I] = d * silu(g);
                           }
                         o.close("dgate_up", dgu.read(), ref, tolerance(st));
                       }});
      // ReLU² over the same sizes: out = relu(x)², and dx = dout·2·relu(x) written in place in dout.
      if (asks(be, Op::Relu2, {st, st}))
        out.push_back({Op::Relu2, false, "relu2" + shape, [=](Backend& b, Outcome& o) {
                         Tensor x(b, st, {sh.N, sh.I}, randn(n, 173, 2.0f)), y(b, st, {sh.N, sh.I});
                         b.relu2({y.view(), x.view()});
                         std::vector<double> ref(n);
                         for (size_t i = 0; i < n; ++i)
                           ref[i] = x.host()[i] > 0 ? x.host()[i] * x.host()[i] : 0.0;
                         o.close("out", y.read(), ref, tolerance(st));
                       }});
      // GELU on its own (--recompute gelu's refill), both forms.
      for (const bool erf : {false, true})
        if (asks(be, Op::Gelu, {st, st}))
          out.push_back({Op::Gelu, false, std::string(erf ? "gelu erf" : "gelu tanh") + shape,
                         [=](Backend& b, Outcome& o) {
                           Tensor x(b, st, {sh.N, sh.I}, randn(n, 176, 3.0f)), y(b, st, {sh.N, sh.I});
                           b.gelu({y.view(), x.view(), erf});
                           std::vector<double> ref(n);
                           for (size_t i = 0; i < n; ++i) {
                             const double v = x.host()[i];
                             ref[i] = erf ? 0.5 * v * std::erfc(-v / std::sqrt(2.0))
                                          : 0.5 * v *
                                                (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) *
                                                                 (v + 0.044715 * v * v * v)));
                           }
                           o.close("out", y.read(), ref, tolerance(st));
                         }});
      // FP8's emulated cast (both formats, scales that are powers of two so x·scale is exact and
      // the float64 quantizer sees what the op rounds), values past the format's largest included.
      for (const Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2})
        if (asks(be, Op::Fp8Cast, {st, st}))
          out.push_back({Op::Fp8Cast, false, std::string("fp8_cast ") + fp8_name(f) + shape,
                         [=](Backend& b, Outcome& o) {
                           const float scale = f == Fp8Format::E4M3 ? 64.0f : 8192.0f;
                           Tensor x(b, st, {sh.N, sh.I}, randn(n, 177, 3.0f)), y(b, st, {sh.N, sh.I});
                           b.fp8_cast({.out = y.view(), .x = x.view(), .scale = scale, .format = f});
                           std::vector<double> ref(n);
                           for (size_t i = 0; i < n; ++i)
                             ref[i] = test::fp8_reference_round(x.host()[i] * scale, f);
                           o.close("out", y.read(), ref, 0.0);
                         }});
      if (asks(be, Op::Relu2Backward, {st, st, st}))
        out.push_back(
            {Op::Relu2Backward, false, "relu2_backward in place" + shape, [=](Backend& b, Outcome& o) {
               Tensor x(b, st, {sh.N, sh.I}, randn(n, 174, 2.0f)), dy(b, st, {sh.N, sh.I}, randn(n, 175));
               b.relu2_backward({dy.view(), dy.view(), x.view()});
               std::vector<double> ref(n);
               for (size_t i = 0; i < n; ++i)
                 ref[i] = x.host()[i] > 0 ? dy.host()[i] * 2.0 * x.host()[i] : 0.0;
               o.close("dx", dy.read(), ref, tolerance(st));
             }});
    }
  }
  qk_norm_cases(be, out);
}

// The whole list for `be`, in the order of backend.h's Op.
inline std::vector<Case> all_cases(const Backend& be) {
  std::vector<Case> out;
  elementwise_cases(be, out);
  linear_cases(be, out);
  linear_backward_cases(be, out);
  layernorm_cases(be, out);
  attention_cases(be, out);
  cross_entropy_cases(be, out);
  embedding_cases(be, out);
  rows_cases(be, out);
  optimizer_cases(be, out);
  muon_cases(be, out);
  llama_cases(be, out);
  return out;
}

// The ops of the enum (and zero) no case of `cases` covers, as " name name ...".
inline std::string uncovered(const std::vector<Case>& cases) {
  constexpr int kOps = kNumOps;
  std::vector<bool> seen(kOps, false);
  bool zero = false;
  for (const Case& c : cases) {
    if (c.zero) zero = true;
    else seen[static_cast<size_t>(c.op)] = true;
    if (c.also >= 0) seen[static_cast<size_t>(c.also)] = true;
  }
  std::string missing;
  for (int op = 0; op < kOps; ++op)
    if (!seen[op]) missing += std::string(" ") + backend_op_name(static_cast<Op>(op));
  return zero ? missing : missing + " zero";
}

// Runs every case on `be` and checks the list covers the interface: each Op of the enum (and zero)
// has cases, every case ran and met its tolerance. Prints the count per op.
inline void run_all(Backend& be) {
  const std::vector<Case> cases = all_cases(be);
  constexpr int kOps = kNumOps;
  std::vector<int> per_op(kOps, 0);
  int zero = 0, ran = 0, failed = 0;
  for (const Case& c : cases) {
    Outcome o;
    OpProfile profile;  // counts the ops the case ran: its entry point runs its op once
    be.set_profile(&profile);
    try {
      c.run(be, o);
    } catch (const std::exception& e) {
      o.misses.push_back(std::string("threw: ") + e.what());
    }
    be.set_profile(nullptr);
    std::int64_t calls = 0;
    for (const OpProfileRow& r : profile.rows()) calls += r.calls;
    const std::int64_t expected = c.also >= 0 ? 2 : 1;
    if (o.misses.empty() && calls != expected)
      o.misses.push_back("ran " + std::to_string(calls) + " ops, expected " + std::to_string(expected));
    ++ran;
    if (!o.misses.empty()) {
      ++failed;
      std::string all;
      for (const std::string& m : o.misses) all += "\n    " + m;
      ADD_FAILURE() << c.name << all;
      continue;
    }
    if (c.zero) {
      ++zero;
    } else {
      ++per_op[static_cast<size_t>(c.op)];
      if (c.also >= 0) ++per_op[static_cast<size_t>(c.also)];
    }
  }
  std::string counts, missing;
  for (int op = 0; op < kOps; ++op) {
    counts += std::string(" ") + backend_op_name(static_cast<Op>(op)) + "=" + std::to_string(per_op[op]);
    if (per_op[op] == 0) missing += std::string(" ") + backend_op_name(static_cast<Op>(op));
  }
  if (zero == 0) missing += " zero";
  std::printf("[ conformance ] %s: %d cases ran of %zu listed (%d failed), %d of %d ops + zero covered:%s zero=%d\n",
              be.name(), ran, cases.size(), failed, kOps - static_cast<int>(std::count(per_op.begin(), per_op.end(), 0)),
              kOps, counts.c_str(), zero);
  EXPECT_EQ(ran, static_cast<int>(cases.size())) << "cases listed but not run";
  EXPECT_TRUE(missing.empty()) << "ops of the enum without a passing case:" << missing;
}

}  // namespace mptrain::conformance
