// Muon over a parameter table: which tensors are matrices (the table's MatrixLayout), the AdamW
// runs between them, and the Newton–Schulz iteration over the backend's matmul.
#include "optim/muon.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "core/named.h"

namespace mptrain {

namespace {

// The quintic's coefficients (Keller Jordan's): chosen to maximise the slope at 0, so that small
// singular values grow fast, at the price of leaving the large ones in roughly [0.7, 1.2].
constexpr float kNsA = 3.4445f, kNsB = -4.7750f, kNsC = 2.0315f;
constexpr double kNormEps = 1e-7;

// A tensor as a layer: out × in.
std::pair<int64_t, int64_t> fans(const ParamSpec& s, int64_t rows, int64_t cols) {
  return s.matrix == MatrixLayout::InOut ? std::pair{cols, rows} : std::pair{rows, cols};
}

// Every spec with a MatrixLayout is 2-D and whole: a ZeRO-1 shard keeps a whole tensor's shape.
void check_whole(const ParamSpec& s) {
  MPT_CHECK(s.shape.size() == 2 && static_cast<size_t>(s.shape[0] * s.shape[1]) == s.numel,
            "[muon] the matrix " + s.name +
                " is cut by this rank's shard: Muon needs whole matrices (the ZeRO-1 partition must cut "
                "between them)");
}

// The matrices, each with the table entries it spans.
struct Unit {
  MuonMatrix m;
  size_t begin = 0, end = 0;
};

std::vector<Unit> units(const ParamTable& table, MuonQkv qkv) {
  std::vector<Unit> out;
  const auto& specs = table.specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& s = specs[i];
    if (s.matrix == MatrixLayout::None) continue;
    check_whole(s);
    const int64_t R = s.shape[0], C = s.shape[1];
    if (s.qkv == QkvRole::Fused && qkv == MuonQkv::Three) {
      // q, k, v side by side along the output dimension: three column blocks (Conv1D) or three
      // row blocks (nn.Linear), each its own matrix.
      const bool columns = s.matrix == MatrixLayout::InOut;
      MPT_CHECK((columns ? C : R) % 3 == 0, "[muon] " + s.name + " does not split into q, k, v");
      for (int j = 0; j < 3; ++j) {
        MuonMatrix m;
        m.name = s.name + "[" + "qkv"[j] + "]";
        m.rows = columns ? R : R / 3;
        m.cols = columns ? C / 3 : C;
        m.ld = C;
        m.offset = s.offset + static_cast<size_t>(columns ? j * m.cols : j * m.rows * C);
        std::tie(m.fan_out, m.fan_in) = fans(s, m.rows, m.cols);
        out.push_back({m, s.offset, s.offset + s.numel});
      }
      continue;
    }
    if (s.qkv == QkvRole::Part && qkv == MuonQkv::One) {
      // q, k, v as consecutive tensors of one shape: one matrix of their rows stacked (nn.Linear)
      MPT_CHECK(
          i + 2 < specs.size() && specs[i + 1].qkv == QkvRole::Part && specs[i + 2].qkv == QkvRole::Part,
          "[muon] " + s.name +
              ": q, k and v are not all in this table (a ZeRO-1 shard must hold them whole)");
      for (size_t j = i + 1; j <= i + 2; ++j) {
        check_whole(specs[j]);
        MPT_CHECK(specs[j].shape == s.shape && specs[j].offset == specs[j - 1].offset + specs[j - 1].numel &&
                      specs[j].matrix == MatrixLayout::OutIn,
                  "[muon] " + specs[j].name + " does not continue " + s.name + " as one q, k, v matrix");
      }
      MuonMatrix m;
      m.name = s.name;
      m.offset = s.offset;
      m.rows = 3 * R, m.cols = C, m.ld = C;
      std::tie(m.fan_out, m.fan_in) = fans(s, m.rows, m.cols);
      out.push_back({m, s.offset, s.offset + 3 * s.numel});
      i += 2;
      continue;
    }
    MuonMatrix m;
    m.name = s.name;
    m.offset = s.offset;
    m.rows = R, m.cols = C, m.ld = C;
    std::tie(m.fan_out, m.fan_in) = fans(s, R, C);
    out.push_back({m, s.offset, s.offset + s.numel});
  }
  return out;
}

// A [rows, cols] fp32 view at base + m.offset whose rows are m.ld apart.
View rows_of(const float* base, const MuonMatrix& m) {
  View v = View::f32(base + m.offset, {m.rows, m.ld});
  v.shape[1] = m.cols;
  return v;
}

// A contiguous [rows, cols] view of a working buffer in `type`.
View work(FloatBuffer& b, StorageType type, int64_t rows, int64_t cols) {
  return View::of(b.data(), type, {rows, cols});
}

}  // namespace

namespace {
constexpr NameTable<MuonLrAdjust, 2> kAdjustNames{
    {{MuonLrAdjust::MatchRmsAdamW, "match_rms_adamw"}, {MuonLrAdjust::Original, "original"}}};
constexpr NameTable<MuonQkv, 2> kQkvNames{{{MuonQkv::Three, "three"}, {MuonQkv::One, "one"}}};
}  // namespace

const char* muon_adjust_name(MuonLrAdjust a) { return name_in(kAdjustNames, a); }
MuonLrAdjust parse_muon_adjust(const std::string& name) { return parse_in(kAdjustNames, name, "--muon-adjust-lr"); }
const char* muon_qkv_name(MuonQkv q) { return name_in(kQkvNames, q); }
MuonQkv parse_muon_qkv(const std::string& name) { return parse_in(kQkvNames, name, "--muon-qkv"); }

void validate(const MuonHyper& h) {
  MPT_CHECK(h.momentum >= 0.0f && h.momentum < 1.0f,
            "--muon-momentum must be in [0, 1), got " + std::to_string(h.momentum));
  MPT_CHECK(h.ns_steps >= 1 && h.ns_steps <= 100,
            "--muon-ns-steps must be in [1, 100], got " + std::to_string(h.ns_steps));
  MPT_CHECK(h.adamw_lr_ratio > 0.0f && std::isfinite(h.adamw_lr_ratio),
            "--muon-adamw-lr must be positive (the AdamW group's learning rate)");
}

std::vector<MuonMatrix> muon_matrices(const ParamTable& table, MuonQkv qkv) {
  std::vector<MuonMatrix> out;
  for (Unit& u : units(table, qkv)) out.push_back(std::move(u.m));
  return out;
}

std::vector<ParamRange> muon_whole_ranges(const ParamTable& table, MuonQkv qkv) {
  std::vector<ParamRange> out;
  for (const Unit& u : units(table, qkv))
    if (out.empty() || out.back().end <= u.begin) out.push_back({u.begin, u.end});  // q, k, v share one
  return out;
}

float muon_lr_scale(const MuonMatrix& m, MuonLrAdjust adjust) {
  const double out = static_cast<double>(m.fan_out), in = static_cast<double>(m.fan_in);
  if (adjust == MuonLrAdjust::Original) return static_cast<float>(std::sqrt(std::max(1.0, out / in)));
  return static_cast<float>(0.2 * std::sqrt(std::max(out, in)));
}

Muon::Muon(const ParamTable& table, const MuonHyper& hyper, const AdamWHyper& adamw, Backend& be)
    : Optimizer(table, {"momentum_buffer", "exp_avg", "exp_avg_sq"}, be),
      hyper_(hyper),
      adamw_(adamw),
      matrices_(muon_matrices(table, hyper.qkv)),
      ns_storage_(be.operand_storage(hyper.ns_math)) {
  validate(hyper_);
  state_[0].holds = StateHolds::Matrices;
  state_[1].holds = state_[2].holds = StateHolds::NonMatrices;
  for (const ParamSpec& s : table.specs()) {
    if (s.matrix != MatrixLayout::None || s.numel == 0) continue;
    if (!adamw_runs_.empty() && adamw_runs_.back().end == s.offset && adamw_runs_.back().decay == s.decay)
      adamw_runs_.back().end += s.numel;
    else
      adamw_runs_.push_back({s.offset, s.offset + s.numel, s.decay});
  }
  size_t most = 0, square = 0;
  for (const MuonMatrix& m : matrices_) {
    const auto k = static_cast<size_t>(std::min(m.rows, m.cols));
    most = std::max(most, static_cast<size_t>(m.rows * m.cols));
    square = std::max(square, k * k);
  }
  const size_t bytes = storage_bytes(ns_storage_);
  const auto floats = [&](size_t n) { return (n * bytes + sizeof(float) - 1) / sizeof(float); };
  u_ = FloatBuffer(most, be.memory());
  x_ = FloatBuffer(floats(most), be.memory());
  y_ = FloatBuffer(floats(most), be.memory());
  a_ = FloatBuffer(floats(square), be.memory());
  b_ = FloatBuffer(floats(square), be.memory());
}

void Muon::adamw_step(float* params, const float* grads, float lr, int64_t t, float grad_scale) {
  for (const AdamWRun& r : adamw_runs_) {
    const auto n = static_cast<std::int64_t>(r.end - r.begin);
    const auto at = [&](const float* base) { return View::f32(base + r.begin, {n}); };
    be_.adamw({.params = at(params),
               .grads = at(grads),
               .m = at(state_[1].buffer.data()),
               .v = at(state_[2].buffer.data()),
               .lr = lr * hyper_.adamw_lr_ratio,
               .beta1 = adamw_.beta1,
               .beta2 = adamw_.beta2,
               .eps = adamw_.eps,
               .weight_decay = r.decay ? adamw_.weight_decay : 0.0f,
               .t = t,
               .grad_scale = grad_scale});
  }
}

View Muon::orthogonalize(const View& u) {
  const double norm = std::sqrt(be_.sum_squares(u));
  be_.scale(u, static_cast<float>(1.0 / (norm + kNormEps)));
  const int64_t rows = u.dim(0), cols = u.dim(1), k = std::min(rows, cols);
  // A wide X is multiplied as X·Xᵀ; a tall one as its transpose would be, without moving it:
  // with Z = Xᵀ, A = Zᵀ·Z and the step Z ← a·Z + Z·B (B is symmetric).
  const bool wide = rows <= cols;
  View x = u;
  if (ns_storage_ != StorageType::F32) {
    x = work(x_, ns_storage_, rows, cols);
    be_.cast(x, u);
  }
  View y = work(x.ptr == x_.data() ? y_ : x_, ns_storage_, rows, cols);
  const View a = work(a_, ns_storage_, k, k), b = work(b_, ns_storage_, k, k);
  const ComputeType math = hyper_.ns_math;
  for (int i = 0; i < hyper_.ns_steps; ++i) {
    be_.matmul({.c = a, .a = wide ? x : x.t(), .b = wide ? x.t() : x, .math = math});  // A = X·Xᵀ
    be_.cast(b, a);
    be_.matmul({.c = b, .a = a, .b = a, .alpha = kNsC, .beta = kNsB, .math = math});  // B = b·A + c·A·A
    be_.cast(y, x);
    be_.matmul({.c = y, .a = wide ? b : x, .b = wide ? x : b, .beta = kNsA, .math = math});  // a·X + B·X
    std::swap(x, y);
  }
  return x;
}

void Muon::step(float* params, const float* grads, float lr, int64_t t, float grad_scale) {
  if (table_.total() == 0) return;
  adamw_step(params, grads, lr, t, grad_scale);
  for (const MuonMatrix& m : matrices_) {
    const View u = work(u_, StorageType::F32, m.rows, m.cols);
    be_.muon_momentum({.m = rows_of(state_[0].buffer.data(), m),
                       .grads = rows_of(grads, m),
                       .u = u,
                       .mu = hyper_.momentum,
                       .grad_scale = grad_scale,
                       .nesterov = hyper_.nesterov});
    const View o = orthogonalize(u);
    be_.muon_update({.params = rows_of(params, m),
                     .o = o,
                     .lr = lr,
                     .weight_decay = adamw_.weight_decay,
                     .scale = muon_lr_scale(m, hyper_.adjust)});
  }
}

}  // namespace mptrain
