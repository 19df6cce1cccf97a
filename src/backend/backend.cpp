// The op interface's entry points: the shape contract of every op, written once for every
// backend; then submit(): the capability check asked with the call's own arguments, the op
// profile's row (bytes from the arguments' views) and the backend's run() hook. Fixed by the
// interface: fp32 LayerNorm statistics, losses and dloss. A linear's bias may be in any storage
// the backend's supports() accepts (the fp32 master, or a GPU plan's 16-bit copy).
#include "backend/backend.h"

#include <array>
#include <cmath>
#include <utility>

#include "core/error.h"

namespace mptrain {

namespace {

constexpr StorageType F32 = StorageType::F32;

constexpr const char* kOpNames[] = {
#define MPTRAIN_OP_NAME(e, name, A, roles) name,
    MPTRAIN_OPS(MPTRAIN_OP_NAME)
#undef MPTRAIN_OP_NAME
};
static_assert(std::size(kOpNames) == static_cast<size_t>(kNumOps),
              "backend/op_list.h generates Op and its names alike");

// The checks of one op call: each failure is one line naming the op, the tensor and its view.
class Check {
 public:
  Check(const char* backend, Op op)
      : who_(std::string("[backend ") + backend + "] " + backend_op_name(op) + ": ") {}
  void that(bool ok, const std::string& what) const {
    if (!ok) throw Error(who_ + what);
  }
  // v has `rank` dimensions (and is present).
  void shape(const View& v, const char* name, std::initializer_list<std::int64_t> dims) const {
    that(!v.empty(), std::string(name) + " is missing");
    bool ok = v.rank == static_cast<int>(dims.size());
    int k = 0;
    for (std::int64_t d : dims) {
      ok = ok && (d < 0 || v.shape[static_cast<size_t>(k)] == d);
      ++k;
    }
    if (ok) return;
    std::string want = "[";
    k = 0;
    for (std::int64_t d : dims) want += (k++ ? "," : "") + (d < 0 ? std::string("*") : std::to_string(d));
    that(false, std::string(name) + " is " + v.describe() + ", expected [" + want.substr(1) + "]");
  }
  void fp32(const View& v, const char* name) const {
    that(v.type == F32, std::string(name) + " is " + v.describe() + ", expected fp32");
  }
  // An index array: int32 [n] (n < 0: any length), or absent when `optional`.
  void ints(const View& v, const char* name, std::int64_t n, bool optional = false) const {
    if (optional && v.empty()) return;
    that(v.type == StorageType::I32 || v.empty(),
         std::string(name) + " is " + v.describe() + ", expected int32");
    shape(v, name, {n});
  }
  void rows_contiguous(const View& v, const char* name) const {
    that(v.contiguous(), std::string(name) + " is " + v.describe() + ", expected a contiguous tensor");
  }
  // An elementwise copy's operands (cast, accumulate, to_operand): both given, contiguous, one size.
  void copy_pair(const View& dst, const View& src) const {
    that(!dst.empty() && !src.empty(), "needs dst and src");
    rows_contiguous(dst, "dst");
    rows_contiguous(src, "src");
    that(dst.numel() == src.numel(),
         "dst " + dst.describe() + " and src " + src.describe() + " differ in size");
  }

 private:
  std::string who_;
};

// --- what each op does, for the op profile (backend/op_profile.h) ---

// The bytes an op reads and writes at least once, from its views: each read or written once, an
// accumulated one twice, a table read (or accumulated) at indexed rows as many rows as the op's
// first dense view has.
template <class A>
double bytes_moved(const A& a) {
  const auto views = views_of(a);
  std::int64_t rows = 0;
  for (const ArgView& v : views)
    if (!rows && !v.view->empty() && v.view->rank > 0 &&
        (v.access == Access::Read || v.access == Access::Write || v.access == Access::Add))
      rows = v.view->dim(0);
  double b = 0.0;
  for (const ArgView& v : views) {
    if (v.view->empty() || v.access == Access::Scratch) continue;
    const double all = static_cast<double>(v.view->bytes());
    const double some =
        v.view->rank > 0 && v.view->dim(0) > 0 ? all / static_cast<double>(v.view->dim(0)) * rows : 0.0;
    b += v.access == Access::Add        ? 2 * all
         : v.access == Access::ReadRows ? some
         : v.access == Access::AddRows  ? 2 * some
                                        : all;
  }
  return b;
}

// A product's row: the op and its shape, rows x inner x columns.
std::string gemm_label(Op op, std::int64_t N, std::int64_t K, std::int64_t M) {
  return std::string(backend_op_name(op)) + " " + std::to_string(N) + "x" + std::to_string(K) + "x" +
         std::to_string(M);
}

// The query-key pairs an attention scores: per sequence T² (bidirectional) or T(T+1)/2 (causal),
// over the packed sequences' own lengths when the host can read them (else B·T², a bound).
double attention_pairs(int B, int T, bool causal, const View& cu_seqlens, bool host_visible) {
  const auto pairs = [causal](double L) { return causal ? L * (L + 1) / 2 : L * L; };
  if (cu_seqlens.empty() || !host_visible) return B * pairs(T);
  const int* cu = cu_seqlens.as<const int>();
  double sum = 0.0;
  for (int b = 0; b < B; ++b) sum += pairs(cu[b + 1] - cu[b]);
  return sum;
}

// The row label and the FLOPs of the ops with products; the rest are named after their op.
template <class A>
OpWork work_of(const A& a, bool) {
  return {backend_op_name(a.op()), 0.0, bytes_moved(a)};
}
OpWork work_of(const LinearArgs& a, bool) {
  const std::int64_t N = a.x.dim(0), K = a.x.dim(1), M = a.w.dim(1);
  return {gemm_label(a.op(), N, K, M), 2.0 * N * K * M, bytes_moved(a)};
}
OpWork work_of(const LinearBackwardArgs& a, bool) {
  const std::int64_t N = a.x.dim(0), K = a.x.dim(1), M = a.w.dim(1);
  return {gemm_label(a.op(), N, K, M), (a.dx.empty() ? 2.0 : 4.0) * N * K * M, bytes_moved(a)};
}
OpWork work_of(const MatmulArgs& a, bool) {
  const std::int64_t M = a.c.dim(0), K = a.a.dim(1), N = a.c.dim(1);
  return {gemm_label(Op::Matmul, M, K, N), 2.0 * M * K * N, bytes_moved(a)};
}
OpWork work_of(const AttentionArgs& a, bool host) {
  return {backend_op_name(a.op()),
          4.0 * a.out.dim(1) * attention_pairs(a.B, a.T, a.causal, a.cu_seqlens, host), bytes_moved(a)};
}
OpWork work_of(const AttentionBackwardArgs& a, bool host) {
  return {backend_op_name(a.op()),
          8.0 * a.dout.dim(1) * attention_pairs(a.B, a.T, a.causal, a.cu_seqlens, host), bytes_moved(a)};
}

}  // namespace

std::vector<const char*> op_dtype_tensors(Op op) {
  return with_op_args(op, [op](auto a) {
    std::vector<const char*> names;
    for (const ArgView& v : a.views())
      if (v.typed && v.access != Access::Scratch && !v.follows && (v.only == 0 || (v.only & op_bit(op))))
        names.push_back(v.name);
    if constexpr (requires { a.types.probs; }) names.push_back("probs");
    return names;
  });
}

const char* backend_op_name(Op op) { return kOpNames[static_cast<size_t>(op)]; }

OpTypes& OpTypes::set(const char* name, StorageType t) {
  MPT_CHECK(count < static_cast<int>(named.size()),
            std::string("[backend] ") + backend_op_name(op) + ": more named tensors than a question holds");
  named[static_cast<size_t>(count++)] = {name, t};
  return *this;
}

bool OpTypes::has(std::string_view name) const {
  for (int i = 0; i < count; ++i)
    if (name == named[static_cast<size_t>(i)].first) return true;
  return false;
}

StorageType OpTypes::operator[](std::string_view name) const {
  for (int i = 0; i < count; ++i)
    if (name == named[static_cast<size_t>(i)].first) return named[static_cast<size_t>(i)].second;
  throw Error(std::string("[backend] ") + backend_op_name(op) + ": the question names no " +
              std::string(name));
}

bool OpTypes::uniform() const {
  for (int i = 1; i < count; ++i)
    if (named[static_cast<size_t>(i)].second != named[0].second) return false;
  return true;
}

std::string OpTypes::describe() const {
  std::string what;
  for (int i = 0; i < count; ++i) {
    const auto& [name, t] = named[static_cast<size_t>(i)];
    what += std::string(i ? " " : "") + name + "=" + storage_name(t);
  }
  if (math != ComputeType::F32) what += std::string(" with ") + compute_name(math) + " products";
  return what;
}

void Backend::require(const OpTypes& t) const {
  if (supports(t)) return;
  throw Error(std::string("[backend ") + this->name() + "] " + backend_op_name(t.op) + ": no kernel for " +
              t.describe());
}

template <class A>
op_result_t<A> Backend::submit(const A& a) {
  require(op_types(a));
  const auto work = [&] { return work_of(a, memory().host_visible()); };
  if constexpr (requires { A::kToHost; }) {
    no_host_transfer(backend_op_name(a.op()));
    return answer([&] { return run(a); }, work);
  } else {
    enqueue([this, a] { run(a); }, work);
  }
}

void Backend::cast(const View& dst, const View& src) {
  const Check c(name(), Op::Cast);
  c.copy_pair(dst, src);
  submit(CastArgs{dst, src});
}

void Backend::zero(const View& v) {
  if (v.empty()) return;
  MPT_CHECK(v.contiguous(),
            "[backend " + std::string(name()) + "] zero: " + v.describe() + " is not contiguous");
  enqueue([this, v] { run_zero(v); }, [&] { return OpWork{"zero", 0, static_cast<double>(v.bytes())}; });
}

void Backend::upload(const View& dst, const void* host) {
  if (dst.empty()) return;
  MPT_CHECK(dst.contiguous(),
            "[backend " + std::string(name()) + "] upload: " + dst.describe() + " is not contiguous");
  no_host_transfer("upload");
  memory().upload(dst.ptr, host, dst.bytes());
}

void Backend::download(void* host, const View& src) {
  if (src.empty()) return;
  MPT_CHECK(src.contiguous(),
            "[backend " + std::string(name()) + "] download: " + src.describe() + " is not contiguous");
  no_host_transfer("download");
  memory().download(host, src.ptr, src.bytes());
}

void Backend::accumulate(const View& dst, const View& src) {
  const Check c(name(), Op::Accumulate);
  c.copy_pair(dst, src);
  c.fp32(dst, "dst");
  submit(AccumulateArgs{dst, src});
}

void Backend::to_operand(const View& dst, const View& src, ComputeType math) {
  const Check c(name(), Op::ToOperand);
  c.copy_pair(dst, src);
  // This backend's operand storage, or the format itself (a policy made for a backend with
  // native GEMMs of it: the copy holds the same values).
  c.that(dst.type == operand_storage(math) || dst.type == compute_storage(math),
         "dst is " + dst.describe() + ", " + compute_name(math) + " products read " +
             storage_name(operand_storage(math)));
  submit(ToOperandArgs{dst, src, math});
}

void Backend::linear(const LinearArgs& a) {
  const Check c(name(), a.op());
  c.shape(a.x, "x", {-1, -1});
  const std::int64_t N = a.x.dim(0), K = a.x.dim(1);
  c.shape(a.w, "w", {K, -1});
  const std::int64_t M = a.w.dim(1);
  c.shape(a.out, "out", {N, M});
  if (!a.bias.empty()) {
    c.shape(a.bias, "bias", {M});  // any storage: the fp32 master, or a GPU plan's 16-bit copy
  }
  c.that(keeps_pre(a.epilogue) || a.pre.empty(), "pre is only for the GELU epilogues");
  c.that(a.epilogue == Epilogue::BiasResidual || a.residual.empty(),
         "residual is only for the residual epilogue");
  if (keeps_pre(a.epilogue)) c.shape(a.pre, "pre", {N, M});
  if (a.epilogue == Epilogue::BiasResidual) c.shape(a.residual, "residual", {N, M});
  submit(a);
}

void Backend::linear_backward(const LinearBackwardArgs& a) {
  const Check c(name(), a.op());
  c.shape(a.x, "x", {-1, -1});
  const std::int64_t N = a.x.dim(0), K = a.x.dim(1);
  c.shape(a.w, "w", {K, -1});
  const std::int64_t M = a.w.dim(1);
  c.shape(a.dy, "dy", {N, M});
  c.shape(a.dw, "dw", {K, M});
  if (!a.dx.empty()) c.shape(a.dx, "dx", {N, K});
  if (!a.db.empty()) {
    c.shape(a.db, "db", {M});
    c.that(a.db.type == a.dw.type, "db is " + a.db.describe() + ", expected dw's dtype");
  }
  c.that(a.epilogue != Epilogue::BiasResidual,
         "the residual epilogue's backward is the caller's (dy flows on)");
  c.that(has_activation(a.epilogue) || a.pre.empty(), "pre is only for the activation epilogues");
  if (has_activation(a.epilogue)) c.shape(a.pre, "pre", {N, M});
  c.that(!a.dx_accumulate || !a.dx.empty(), "dx_accumulate without dx");
  c.that(a.x_epilogue != Epilogue::BiasResidual, "x_epilogue is an activation (GELU, tanh) or none");
  c.that(has_activation(a.x_epilogue) || a.x_pre.empty(), "x_pre is only for an x_epilogue activation");
  if (has_activation(a.x_epilogue)) {
    c.that(!a.dx.empty() && !a.dx_accumulate, "an x_epilogue's derivative needs dx written, not accumulated");
    c.shape(a.x_pre, "x_pre", {N, K});
  }
  submit(a);
}

namespace {

// The statistics and shift of a norm: LayerNorm's mean and beta (or dbeta, in dgamma's dtype), none
// for RMSNorm. Names: {shift, scale} as the op calls them.
void check_norm_extras(const Check& c, bool rms, const View& mean, const View& shift, const View& scale,
                       std::array<const char*, 2> names, std::int64_t N, std::int64_t C) {
  const auto [shift_name, scale_name] = names;
  if (rms) {
    c.that(mean.empty() && shift.empty(), std::string("RMSNorm takes no mean or ") + shift_name);
    return;
  }
  c.shape(mean, "mean", {N});
  c.fp32(mean, "mean");
  c.shape(shift, shift_name, {C});
  c.that(shift.type == scale.type,
         std::string(shift_name) + " is " + shift.describe() + ", expected " + scale_name + "'s dtype");
}

}  // namespace

namespace {
// A LayerNorm tensor: x's layout (NormRows: [N, C] contiguous, or [A, G, C] heads at stride S).
void check_norm_rows(const Check& c, const View& x) {
  const bool rows = x.rank == 2 && x.contiguous();
  const bool heads =
      x.rank == 3 && x.stride[2] == 1 && x.stride[1] == x.dim(2) && x.stride[0] >= x.dim(1) * x.dim(2);
  c.that(rows || heads,
         "x is " + x.describe() +
             ", expected a contiguous [N, C] or [A, G, C] rows of C at a row stride of at least G·C");
}
void check_like_x(const Check& c, const View& v, const char* name, const View& x) {
  c.that(
      !v.empty() && v.rank == x.rank && v.shape == x.shape && v.stride == x.stride,
      std::string(name) + " is " + v.describe() + ", expected x's shape and strides (" + x.describe() + ")");
}
}  // namespace

void Backend::layernorm(const LayerNormArgs& a) {
  const Check c(name(), a.op());
  check_norm_rows(c, a.x);
  const NormRows r = NormRows::of(a.x);
  check_like_x(c, a.out, "out", a.x);
  c.shape(a.rstd, "rstd", {r.rows});
  c.fp32(a.rstd, "rstd");
  c.shape(a.gamma, "gamma", {r.C});
  check_norm_extras(c, a.rms, a.mean, a.beta, a.gamma, {"beta", "gamma"}, r.rows, r.C);
  submit(a);
}

void Backend::layernorm_backward(const LayerNormBackwardArgs& a) {
  const Check c(name(), a.op());
  check_norm_rows(c, a.x);
  const NormRows r = NormRows::of(a.x);
  check_like_x(c, a.dx, "dx", a.x);
  check_like_x(c, a.dout, "dout", a.x);
  c.that(a.dx.ptr != a.dout.ptr || (!a.accumulate && a.dx.type == a.dout.type),
         "dx may alias dout only when written (accumulate = false), in one dtype");
  c.shape(a.gamma, "gamma", {r.C});
  c.shape(a.dgamma, "dgamma", {r.C});
  c.shape(a.rstd, "rstd", {r.rows});
  c.fp32(a.rstd, "rstd");
  check_norm_extras(c, a.rms, a.mean, a.dbeta, a.dgamma, {"dbeta", "dgamma"}, r.rows, r.C);
  submit(a);
}

namespace {

// The rows of a batch's tensors: B·T, or packed (backend.h's EmbeddingArgs) whatever `x` holds
// up to B·T (cu_seqlens may live in device memory, so its last entry is not read here).
std::int64_t packed_rows(const Check& c, int B, int T, const View& x, const char* name, bool packed) {
  const std::int64_t full = static_cast<std::int64_t>(B) * T;
  if (!packed) return full;
  c.that(x.rank == 2 && x.dim(0) <= full,
         std::string(name) + " is " + x.describe() +
             ": packed sequences hold at most B·T = " + std::to_string(full) + " rows");
  return x.dim(0);
}

// The packed layout itself, where the host can read cu_seqlens (a host-visible backend's memory):
// starting at 0, sequences of 1..T rows, ending at the tensors' last row. A device backend checks
// it where the offsets live (backend/cuda/rows.h's check_packing) and reports at its next sync.
void check_packing(const Check& c, const View& cu_seqlens, int B, int T, std::int64_t rows,
                   bool host_visible) {
  c.ints(cu_seqlens, "cu_seqlens", B + 1, true);
  if (cu_seqlens.empty() || !host_visible) return;
  const int* cu = cu_seqlens.as<const int>();
  c.that(cu[0] == 0, "cu_seqlens starts at " + std::to_string(cu[0]) + ", not 0");
  for (int b = 0; b < B; ++b)
    c.that(cu[b + 1] - cu[b] >= 1 && cu[b + 1] - cu[b] <= T,
           "packed sequence " + std::to_string(b) + " has " + std::to_string(cu[b + 1] - cu[b]) +
               " rows, not in [1, " + std::to_string(T) + "]");
  c.that(cu[B] == rows, "packed sequences end at row " + std::to_string(cu[B]) + " (cu_seqlens[" +
                            std::to_string(B) + "]), but the tensors hold " + std::to_string(rows) + " rows");
}

// The shape contract shared by attention and its backward.
void check_attention(const Check& c, int B, int T, int NH, int kv_heads, const View& qkv, const View& out,
                     const char* out_name, const AttentionDtypes& t, bool packed) {
  c.that(B >= 0 && T >= 0 && NH > 0, "needs B, T >= 0 and NH > 0");
  const std::int64_t rows = packed_rows(c, B, T, qkv, "qkv", packed);
  c.shape(out, out_name, {rows, -1});
  const std::int64_t C = out.dim(1), kv = kv_heads ? kv_heads : NH;
  c.that(C % NH == 0, std::string(out_name) + " is " + out.describe() + ": C a multiple of NH = " +
                          std::to_string(NH) + " expected");
  c.that(kv > 0 && NH % kv == 0,
         "kv_heads " + std::to_string(kv_heads) + " does not divide NH = " + std::to_string(NH));
  c.shape(qkv, "qkv", {rows, (NH + 2 * kv) * (C / NH)});
  c.rows_contiguous(qkv, "qkv");
  c.rows_contiguous(out, out_name);
  c.that(qkv.type == t.qkv, "qkv is " + qkv.describe() + ", the types say " + storage_name(t.qkv));
  c.that(out.type == t.out,
         std::string(out_name) + " is " + out.describe() + ", the types say " + storage_name(t.out));
}

// saved and scratch hold what attention_bytes says the shape needs.
void check_attention_memory(const Check& c, const AttentionBytes& need, const View& saved,
                            const View& scratch) {
  c.that(need.saved == 0 || (!saved.empty() && saved.bytes() >= need.saved),
         "saved holds " + std::to_string(saved.bytes()) + " bytes, needs " + std::to_string(need.saved));
  c.that(
      need.scratch == 0 || (!scratch.empty() && scratch.bytes() >= need.scratch),
      "scratch holds " + std::to_string(scratch.bytes()) + " bytes, needs " + std::to_string(need.scratch));
}

}  // namespace

int attention_memory_batch(int B, int T, std::int64_t rows, bool packed) {
  if (!packed || T <= 0) return B;
  return static_cast<int>((rows + T - 1) / T);
}

void Backend::attention(const AttentionArgs& a) {
  const Check c(name(), Op::Attention);
  check_attention(c, a.B, a.T, a.NH, a.kv_heads, a.qkv, a.out, "out", a.types, !a.cu_seqlens.empty());
  check_packing(c, a.cu_seqlens, a.B, a.T, a.qkv.dim(0), memory().host_visible());
  check_attention_memory(
      c,
      attention_bytes(attention_memory_batch(a.B, a.T, a.qkv.dim(0), !a.cu_seqlens.empty()), a.T,
                      static_cast<int>(a.out.dim(1)), a.NH, a.types),
      a.saved, a.scratch);
  c.that(!a.causal || a.key_mask.empty(), "a key mask is for the bidirectional attention");
  c.that(!a.causal || a.cu_seqlens.empty(), "packed sequences are for the bidirectional attention");
  c.that(a.key_mask.empty() || a.cu_seqlens.empty(), "packed sequences take no key mask");
  c.ints(a.key_mask, "key_mask", static_cast<std::int64_t>(a.B) * a.T, true);
  submit(a);
}

void Backend::attention_backward(const AttentionBackwardArgs& a) {
  const Check c(name(), Op::AttentionBackward);
  check_attention(c, a.B, a.T, a.NH, a.kv_heads, a.qkv, a.dout, "dout", a.types, !a.cu_seqlens.empty());
  check_packing(c, a.cu_seqlens, a.B, a.T, a.qkv.dim(0), memory().host_visible());
  c.that(!a.causal || a.cu_seqlens.empty(), "packed sequences are for the bidirectional attention");
  c.shape(a.dqkv, "dqkv", {a.qkv.dim(0), a.qkv.dim(1)});
  c.rows_contiguous(a.dqkv, "dqkv");
  c.shape(a.out, "out", {a.dout.dim(0), a.dout.dim(1)});
  c.rows_contiguous(a.out, "out");
  c.that(a.out.type == a.types.out,
         "out is " + a.out.describe() + ", the types say " + storage_name(a.types.out));
  c.that(a.dqkv.type == a.types.qkv,
         "dqkv is " + a.dqkv.describe() + ", the types say " + storage_name(a.types.qkv));
  check_attention_memory(
      c,
      attention_bytes(attention_memory_batch(a.B, a.T, a.qkv.dim(0), !a.cu_seqlens.empty()), a.T,
                      static_cast<int>(a.dout.dim(1)), a.NH, a.types),
      a.saved, a.scratch);
  submit(a);
}

void Backend::cross_entropy(const CrossEntropyArgs& a) {
  const Check c(name(), a.op());
  c.shape(a.logits, "logits", {-1, -1});
  const std::int64_t N = a.logits.dim(0), Vp = a.logits.dim(1);
  c.that(a.vocab > 0 && a.vocab <= Vp,
         "vocab " + std::to_string(a.vocab) + " is outside (0, " + std::to_string(Vp) + "]");
  c.that(!a.targets.empty() || !a.sampled.empty() || N == 0, "needs targets");
  c.that(a.sampled.empty() || !a.dlogits.empty(), "the sampled loss writes dlogits: give it one");
  c.ints(a.targets, "targets", N, true);
  c.ints(a.sampled, "sampled", N, true);
  c.shape(a.losses, "losses", {N});
  c.fp32(a.losses, "losses");
  if (!a.dlogits.empty()) {
    c.shape(a.dlogits, "dlogits", {N, Vp});
    c.shape(a.dloss, "dloss", {N});
    c.fp32(a.dloss, "dloss");
    c.rows_contiguous(a.dlogits, "dlogits");
    c.that(a.dlogits.ptr != a.logits.ptr || a.dlogits.type == a.logits.type,
           "dlogits may alias logits only in the same dtype");
  }
  c.rows_contiguous(a.logits, "logits");
  submit(a);
}

namespace {

// The embeddings' contract, forward and backward alike: `rows` (out or dout) over the batch's
// layout, the ids of its rows, and the word, position and type tables (or their gradients: the
// names say which) with C columns, in one dtype, the type table exactly when there are segment ids.
void check_embedding(const Check& c, int B, int T, const View& rows, const View& tokens, const View& types,
                     const View& cu_seqlens, bool host_visible, const View& word, const View& pos,
                     const View& type_table, std::initializer_list<const char*> names) {
  const char *rows_name = names.begin()[0], *word_name = names.begin()[1], *pos_name = names.begin()[2],
             *type_name = names.begin()[3];
  c.that(B >= 0 && T >= 0, "needs B, T >= 0");
  c.shape(word, word_name, {-1, -1});
  const std::int64_t C = word.dim(1);
  c.shape(rows, rows_name, {packed_rows(c, B, T, rows, rows_name, !cu_seqlens.empty()), C});
  c.ints(tokens, "tokens", rows.dim(0));
  c.ints(types, "types", rows.dim(0), true);
  check_packing(c, cu_seqlens, B, T, rows.dim(0), host_visible);
  if (!pos.empty()) {  // none: the token rows alone (Llama's rotary positions come later)
    c.shape(pos, pos_name, {-1, C});
    c.that(pos.dim(0) >= T, std::string(pos_name) + " has " + std::to_string(pos.dim(0)) + " rows for " +
                                std::to_string(T) + " positions");
  }
  c.that(types.empty() == type_table.empty(), std::string("segment ids and ") + type_name + " come together");
  if (!types.empty()) c.shape(type_table, type_name, {-1, C});
  for (const View* v : {&pos, &type_table})
    if (!v->empty())
      c.that(v->type == word.type,
             std::string(word_name) + ", " + pos_name + " and " + type_name + " differ in dtype");
  for (const View* v : {&rows, &word, &pos, &type_table})
    if (!v->empty()) c.rows_contiguous(*v, "an embedding tensor");
}

}  // namespace

void Backend::embedding(const EmbeddingArgs& a) {
  const Check c(name(), Op::Embedding);
  check_embedding(c, a.B, a.T, a.out, a.tokens, a.types, a.cu_seqlens, memory().host_visible(), a.word, a.pos,
                  a.type_table, {"out", "word", "pos", "type_table"});
  submit(a);
}

void Backend::embedding_backward(const EmbeddingBackwardArgs& a) {
  const Check c(name(), Op::EmbeddingBackward);
  check_embedding(c, a.B, a.T, a.dout, a.tokens, a.types, a.cu_seqlens, memory().host_visible(), a.dword,
                  a.dpos, a.dtype, {"dout", "dword", "dpos", "dtype"});
  c.that(a.pad_token < 0 || !a.types.empty(), "pad_token is BERT's word table's (it comes with segment ids)");
  submit(a);
}

namespace {

// rows: int32 [count], count at most the small tensor's rows.
void check_rows(const Check& c, const View& big, const View& small, const View& rows, const char* bname,
                const char* sname) {
  c.shape(big, bname, {-1, -1});
  c.shape(small, sname, {-1, big.dim(1)});
  c.rows_contiguous(big, bname);
  c.rows_contiguous(small, sname);
  c.ints(rows, "rows", -1);
  c.that(rows.dim(0) <= small.dim(0), "rows has " + std::to_string(rows.dim(0)) + " indices for " +
                                          std::to_string(small.dim(0)) + " rows of " + sname);
  // The indices themselves are in the backend's memory: the kernel checks them as it reads them.
}

}  // namespace

void Backend::gather_rows(const View& dst, const View& src, const View& rows) {
  const Check c(name(), Op::GatherRows);
  check_rows(c, src, dst, rows, "src", "dst");
  submit(GatherRowsArgs{dst, src, rows});
}

void Backend::scatter_add_rows(const View& dst, const View& src, const View& rows) {
  const Check c(name(), Op::ScatterAddRows);
  check_rows(c, dst, src, rows, "dst", "src");
  submit(ScatterAddRowsArgs{dst, src, rows});
}

void Backend::argmax_rows(const View& best, const View& x, int n) {
  const Check c(name(), Op::ArgmaxRows);
  c.shape(x, "x", {-1, -1});
  c.rows_contiguous(x, "x");
  c.that(n > 0 && n <= x.dim(1),
         "n " + std::to_string(n) + " is outside (0, " + std::to_string(x.dim(1)) + "]");
  c.ints(best, "best", -1);
  c.that(best.dim(0) <= x.dim(0),
         "best has " + std::to_string(best.dim(0)) + " places for " + std::to_string(x.dim(0)) + " rows");
  submit(ArgmaxRowsArgs{best, x, n});
}

// --- the optimizer's kernels: fp32 tensors, contiguous, of one size ---

namespace {

// Every view present, fp32, contiguous and of `first`'s size.
void same_flat_f32(const Check& c, std::initializer_list<std::pair<const View*, const char*>> views) {
  const View& first = *views.begin()->first;
  for (const auto& [v, name] : views) {
    c.that(!v->empty(), std::string(name) + " is missing");
    c.fp32(*v, name);
    c.rows_contiguous(*v, name);
    c.that(v->numel() == first.numel(), std::string(name) + " is " + v->describe() + ", expected " +
                                            std::to_string(first.numel()) + " elements");
  }
}

}  // namespace

std::vector<std::uint32_t> decay_mask_bits(size_t n, const std::vector<std::pair<size_t, size_t>>& decayed) {
  std::vector<std::uint32_t> mask((n + 31) / 32, 0u);
  for (const auto& [begin, end] : decayed) {
    MPT_CHECK(begin <= end && end <= n, "[decay mask] range [" + std::to_string(begin) + ", " +
                                            std::to_string(end) + ") outside " + std::to_string(n) +
                                            " parameters");
    for (size_t i = begin; i < end; ++i) mask[i >> 5] |= 1u << (i & 31);
  }
  return mask;
}

void Backend::adamw(const AdamWArgs& a) {
  const Check c(name(), Op::AdamW);
  same_flat_f32(c, {{&a.params, "params"}, {&a.grads, "grads"}, {&a.m, "m"}, {&a.v, "v"}});
  c.that(a.t >= 1, "t is " + std::to_string(a.t) + ", expected the 1-based step");
  c.ints(a.decay_mask, "decay_mask", (a.params.numel() + 31) / 32, true);
  if (!a.copy.empty()) {
    c.copy_pair(a.copy, a.params);
    c.that(a.copy.type == operand_storage(a.math) || a.copy.type == compute_storage(a.math),
           "copy is " + a.copy.describe() + ", " + compute_name(a.math) + " products read " +
               storage_name(operand_storage(a.math)));
  }
  submit(a);
}

void Backend::sophia(const SophiaArgs& a) {
  const Check c(name(), Op::Sophia);
  same_flat_f32(c, {{&a.params, "params"}, {&a.grads, "grads"}, {&a.m, "m"}, {&a.h, "h"}});
  c.ints(a.decay_mask, "decay_mask", (a.params.numel() + 31) / 32, true);
  submit(a);
}

void Backend::sophia_hessian(const View& h, const View& ghat, float beta2) {
  const Check c(name(), Op::SophiaHessian);
  same_flat_f32(c, {{&h, "h"}, {&ghat, "ghat"}});
  submit(SophiaHessianArgs{h, ghat, beta2});
}

std::int64_t Backend::count_unclipped(const View& m, const View& h, float rho_b) {
  const Check c(name(), Op::CountUnclipped);
  same_flat_f32(c, {{&m, "m"}, {&h, "h"}});
  return submit(CountUnclippedArgs{m, h, rho_b});
}

bool Backend::unscale_and_check(const View& grads, float inv_scale) {
  const Check c(name(), Op::UnscaleCheck);
  same_flat_f32(c, {{&grads, "grads"}});
  return submit(UnscaleCheckArgs{grads, inv_scale});
}

double Backend::sum_squares(const View& x) {
  const Check c(name(), Op::SumSquares);
  same_flat_f32(c, {{&x, "x"}});
  return submit(SumSquaresArgs{x});
}

void Backend::scale(const View& x, float factor) {
  const Check c(name(), Op::Scale);
  same_flat_f32(c, {{&x, "x"}});
  submit(ScaleArgs{x, factor});
}

void Backend::rope(const RopeArgs& a) {
  const Check c(name(), Op::Rope);
  c.shape(a.x, "x", {-1, -1});
  c.rows_contiguous(a.x, "x");
  const std::int64_t rows = a.x.dim(0), W = a.x.dim(1);
  c.that(a.T > 0 && rows % a.T == 0, "rows " + std::to_string(rows) + " are no whole sequences of T=" +
                                         std::to_string(a.T));
  c.that(a.head_size > 0 && a.head_size % 2 == 0, "head_size " + std::to_string(a.head_size) +
                                                      " must be even (channels turn in pairs)");
  c.that(a.heads > 0 && static_cast<std::int64_t>(a.heads) * a.head_size <= W,
         std::to_string(a.heads) + " heads of " + std::to_string(a.head_size) + " exceed a row of " +
             std::to_string(W));
  c.that(std::isfinite(a.theta) && a.theta > 1.0f, "theta must be finite and above 1");
  submit(a);
}

void Backend::swiglu(const SwigluArgs& a) {
  const Check c(name(), Op::Swiglu);
  c.shape(a.out, "out", {-1, -1});
  c.shape(a.gate_up, "gate_up", {a.out.dim(0), 2 * a.out.dim(1)});
  for (const View* v : {&a.out, &a.gate_up}) c.rows_contiguous(*v, "a SwiGLU tensor");
  submit(a);
}

void Backend::swiglu_backward(const SwigluBackwardArgs& a) {
  const Check c(name(), Op::SwigluBackward);
  c.shape(a.dout, "dout", {-1, -1});
  c.shape(a.gate_up, "gate_up", {a.dout.dim(0), 2 * a.dout.dim(1)});
  c.shape(a.dgate_up, "dgate_up", {a.dout.dim(0), 2 * a.dout.dim(1)});
  c.that(a.dgate_up.ptr != a.gate_up.ptr, "dgate_up must not alias gate_up");
  for (const View* v : {&a.dgate_up, &a.dout, &a.gate_up}) c.rows_contiguous(*v, "a SwiGLU tensor");
  submit(a);
}

void Backend::relu2(const Relu2Args& a) {
  const Check c(name(), Op::Relu2);
  c.shape(a.x, "x", {-1, -1});
  c.shape(a.out, "out", {a.x.dim(0), a.x.dim(1)});
  for (const View* v : {&a.out, &a.x}) c.rows_contiguous(*v, "a ReLU² tensor");
  submit(a);
}

void Backend::gelu(const GeluArgs& a) {
  const Check c(name(), Op::Gelu);
  c.shape(a.x, "x", {-1, -1});
  c.shape(a.out, "out", {a.x.dim(0), a.x.dim(1)});
  c.that(a.out.ptr != a.x.ptr || a.out.type == a.x.type, "out aliases x in another dtype");
  for (const View* v : {&a.out, &a.x}) c.rows_contiguous(*v, "a GELU tensor");
  submit(a);
}

void Backend::fp8_cast(const Fp8CastArgs& a) {
  const Check c(name(), Op::Fp8Cast);
  c.that(a.out.numel() == a.x.numel(), "out and x differ in size");
  c.that(a.out.ptr != a.x.ptr || a.out.type == a.x.type, "out aliases x in another dtype");
  c.that(a.scale > 0.0f && std::isfinite(a.scale), "the scale must be positive and finite");
  c.rows_contiguous(a.out, "out");
  c.rows_contiguous(a.x, "x");
  submit(a);
}

double Backend::amax(const View& x) {
  const Check c(name(), Op::Amax);
  c.rows_contiguous(x, "x");
  return submit(AmaxArgs{x});
}

void Backend::relu2_backward(const Relu2BackwardArgs& a) {
  const Check c(name(), Op::Relu2Backward);
  c.shape(a.x, "x", {-1, -1});
  c.shape(a.dx, "dx", {a.x.dim(0), a.x.dim(1)});
  c.shape(a.dout, "dout", {a.x.dim(0), a.x.dim(1)});
  c.that(a.dx.ptr != a.x.ptr, "dx must not alias x");
  c.that(a.dx.ptr != a.dout.ptr || a.dx.type == a.dout.type, "dx aliases dout in another dtype");
  for (const View* v : {&a.dx, &a.dout, &a.x}) c.rows_contiguous(*v, "a ReLU² tensor");
  submit(a);
}

void Backend::matmul(const MatmulArgs& a) {
  const Check c(name(), Op::Matmul);
  c.shape(a.c, "c", {-1, -1});
  c.shape(a.a, "a", {a.c.dim(0), -1});
  c.shape(a.b, "b", {a.a.dim(1), a.c.dim(1)});
  c.rows_contiguous(a.c, "c");
  for (const auto& [v, n] : {std::pair{&a.a, "a"}, std::pair{&a.b, "b"}})
    c.that(v->contiguous() || v->t().contiguous(),
           std::string(n) + " is " + v->describe() + ", expected a contiguous matrix or its transpose");
  c.that(a.a.type == a.b.type, "a is " + a.a.describe() + " but b is " + a.b.describe());
  c.that(a.c.type == a.a.type || a.c.type == F32,
         "c is " + a.c.describe() + ", expected the operands' type or fp32");
  submit(a);
}

namespace {

// [R, W] with contiguous columns and rows at any stride of at least W: a column block of a
// wider row-major matrix (Muon's q, k or v inside GPT-2's c_attn).
void row_strided(const Check& c, const View& v, const char* name, const View& like) {
  c.shape(v, name, {like.dim(0), like.dim(1)});
  c.that(v.stride[1] == 1 && v.stride[0] >= v.shape[1],
         std::string(name) + " is " + v.describe() + ", expected rows of contiguous columns");
}

}  // namespace

void Backend::muon_momentum(const MuonMomentumArgs& a) {
  const Check c(name(), Op::MuonMomentum);
  c.shape(a.u, "u", {-1, -1});
  c.rows_contiguous(a.u, "u");
  row_strided(c, a.m, "m", a.u);
  row_strided(c, a.grads, "grads", a.u);
  c.that(a.m.stride[0] == a.grads.stride[0],
         "m is " + a.m.describe() + " but grads is " + a.grads.describe());
  for (const auto& [v, n] : {std::pair{&a.m, "m"}, std::pair{&a.grads, "grads"}, std::pair{&a.u, "u"}})
    c.fp32(*v, n);
  submit(a);
}

void Backend::muon_update(const MuonUpdateArgs& a) {
  const Check c(name(), Op::MuonUpdate);
  c.shape(a.o, "o", {-1, -1});
  c.rows_contiguous(a.o, "o");
  row_strided(c, a.params, "params", a.o);
  c.fp32(a.params, "params");
  submit(a);
}

// --- graphs ---

namespace {

// The default capture's graph: the recorded calls, made again in order.
class RecordedGraph final : public Graph {
 public:
  explicit RecordedGraph(std::vector<std::function<void()>> calls) : calls_(std::move(calls)) {}
  void replay() override {
    for (const auto& call : calls_) call();
  }

 private:
  std::vector<std::function<void()>> calls_;
};

}  // namespace

void Backend::set_profile(OpProfile* profile) {
  MPT_CHECK(profile == nullptr || !capturing_,
            std::string("[backend ") + name() +
                "] op profile: not while capturing a graph (its ops replay unseen)");
  profile_ = profile;
}

void Backend::no_host_transfer(const char* what) const {
  MPT_CHECK(!capturing_, std::string("[backend ") + name() + "] " + what +
                             " while capturing a graph: a graph replays only the backend's own work "
                             "(stage host values before it, read them after)");
}

void Backend::begin_capture() {
  MPT_CHECK(!capturing_, std::string("[backend ") + name() + "] a graph is already being captured");
  run_begin_capture();
  capturing_ = true;
}

std::unique_ptr<Graph> Backend::end_capture() {
  MPT_CHECK(capturing_, std::string("[backend ") + name() + "] end_capture without begin_capture");
  capturing_ = false;
  return run_end_capture();
}

void Backend::run_begin_capture() { recorded_ = std::make_unique<std::vector<std::function<void()>>>(); }

std::unique_ptr<Graph> Backend::run_end_capture() {
  auto graph = std::make_unique<RecordedGraph>(std::move(*recorded_));
  recorded_.reset();
  return graph;
}

}  // namespace mptrain
