// The CPU backend: each op of the interface routed to the cpu:: kernel that serves it (one kernel
// for every precision, fp32 included, where its dtypes are parameters); 16-bit tensors a kernel
// does not take (a GPU plan's) are widened around its fp32 form (backend/cpu/widening.h).
#include "backend/cpu/cpu_backend.h"

#include <cstring>
#include <string_view>

#include "backend/cpu/context.h"
#include "backend/cpu/widening.h"
#include "backend/ops/activations.h"
#include "backend/ops/attention.h"
#include "backend/ops/convert.h"
#include "backend/ops/crossentropy.h"
#include "backend/ops/embeddings.h"
#include "backend/ops/fp8.h"
#include "backend/ops/gemm.h"
#include "backend/ops/layernorm.h"
#include "backend/ops/optimizer.h"
#include "backend/ops/residual.h"
#include "backend/ops/rope.h"
#include "core/error.h"

namespace mptrain::cpu {

namespace {

constexpr StorageType F32 = StorageType::F32;

// A 2-D view as a GEMM operand, read through its strides.
GemmOperand operand(const View& v) { return {v.ptr, v.type, GemmLayout{0, 0, v.stride[0], v.stride[1]}}; }
GemmLayout layout(const View& v) { return {0, 0, v.stride[0], v.stride[1]}; }

int as_int(std::int64_t n) { return static_cast<int>(n); }


}  // namespace

CpuBackend::CpuBackend(Context& ctx) : ctx_(ctx), ws_(ctx) {}
CpuBackend::CpuBackend() : own_(std::make_unique<Context>()), ctx_(*own_), ws_(*own_) {}
CpuBackend::~CpuBackend() = default;

void* CpuBackend::scratch(int i, size_t bytes) {
  FloatBuffer& b = scratch_[i];
  const size_t floats = (bytes + sizeof(float) - 1) / sizeof(float);
  if (b.size() < floats) b.resize(floats);
  return b.data();
}

void* CpuBackend::scratch_or_own(const View& given, int i, size_t bytes) {
  return !given.empty() && given.bytes() >= bytes ? given.ptr : scratch(i, bytes);
}

AttentionTypes CpuBackend::typed(const AttentionDtypes& t) const {
  return {t.qkv, t.probs, t.out, ws_.operand_storage(t.scores), t.scores, t.values};
}

AttentionBytes CpuBackend::attention_bytes(int B, int T, int C, int NH, const AttentionDtypes& t) const {
  return {attention_saved_bytes_typed(B, T, C, NH, typed(t)),
          attention_scratch_bytes_typed(B, T, C, NH, typed(t))};
}


bool CpuBackend::can_run(const OpTypes& /*t*/) const {
  // Every combination runs here: every GEMM arithmetic on every storage (gemm_mixed converts
  // what is not in its format; fp16 without AVX512-FP16 is emulated exactly), the typed kernels
  // on theirs, and a 16-bit tensor no kernel takes is widened around the fp32 kernel.
  return true;
}

void CpuBackend::run(const CastArgs& a) {
  if (a.dst.ptr == a.src.ptr && a.dst.type == a.src.type) return;
  convert(a.dst.ptr, a.dst.type, a.src.ptr, a.src.type, static_cast<size_t>(a.src.numel()));
}

void CpuBackend::run_zero(const View& v) { std::memset(v.ptr, 0, v.bytes()); }

void CpuBackend::run(const AccumulateArgs& a) {
  if (widened(a, every_view)) return;
  residual_forward(a.dst.as<float>(), a.dst.as<float>(), a.src.as<float>(),
                   static_cast<size_t>(a.dst.numel()));
}

void CpuBackend::run(const ToOperandArgs& a) {
  const size_t n = static_cast<size_t>(a.src.numel());
  // The format itself where this CPU would hold it in fp32 (fp16 without fp16 GEMMs): the copy
  // a policy made for native fp16 GEMMs reads, rounded once.
  if (a.dst.type != ws_.operand_storage(a.math)) {
    convert(a.dst.ptr, a.dst.type, a.src.ptr, a.src.type, n);
    return;
  }
  to_gemm_operand(a.dst.ptr, a.src.ptr, a.src.type, n, a.math, ws_);
}

void CpuBackend::run(const LinearArgs& a) {
  // The bias, and the residual add's tensors, in fp32 (GEMM operands are gemm_mixed's).
  const bool residual = a.epilogue == Epilogue::BiasResidual;
  if (widened(a, [&](std::string_view n) {
        return n == "bias" || (residual && (n == "out" || n == "residual"));
      }))
    return;
  const int N = as_int(a.x.dim(0)), K = as_int(a.x.dim(1)), M = as_int(a.w.dim(1));
  const size_t NM = static_cast<size_t>(N) * M;
  const float* bias = a.bias.empty() ? nullptr : a.bias.as<float>();
  // The fp32 accumulator: the first tensor the epilogue writes (GELU's pre, or out) when it is
  // fp32 and contiguous, so an fp32 linear takes no scratch; else the caller's or our own.
  const View& first = keeps_pre(a.epilogue) ? a.pre : a.out;
  const bool in_place = a.epilogue != Epilogue::BiasResidual && first.type == F32 && first.contiguous();
  float* acc =
      in_place ? first.as<float>() : static_cast<float*>(scratch_or_own(a.scratch, 0, NM * sizeof(float)));
  GemmOperand w = operand(a.w);
  w.ready = a.w_rounded;
  gemm_mixed(acc, F32, GemmLayout{0, 0, M, 1}, operand(a.x), w, a.math, 1, 1, N, M, K, false, ws_, ctx_);
  switch (a.epilogue) {
    case Epilogue::Bias:
      if (!in_place || bias) bias_forward_typed(a.out.ptr, a.out.type, acc, bias, N, M);  // acc may be out
      return;
    case Epilogue::BiasGelu:
    case Epilogue::BiasGeluErf:
      bias_gelu_forward_typed(a.pre.ptr, a.pre.type, a.out.ptr, a.out.type, acc, bias, N, M,
                              a.epilogue == Epilogue::BiasGelu ? GeluForm::Tanh : GeluForm::Erf);
      return;
    case Epilogue::BiasTanh:
      bias_forward_typed(a.out.ptr, a.out.type, acc, bias, N, M);
      tanh_forward_typed(a.out.ptr, a.out.type, a.out.ptr, a.out.type, NM);
      return;
    case Epilogue::BiasResidual:
      residual_bias_forward(a.out.as<float>(), a.residual.as<float>(), acc, bias, a.rounding, N, M);
      return;
  }
}

namespace {

// d(pre) (dtype t) = act'(saved)·dy: GELU's derivative at its input, tanh's from its output.
void activation_backward(Epilogue e, void* dpre, StorageType t, const View& saved, const float* dy,
                         size_t n) {
  if (e == Epilogue::BiasGelu) gelu_backward_typed(dpre, t, saved.ptr, saved.type, dy, n);
  if (e == Epilogue::BiasGeluErf) gelu_erf_backward_typed(dpre, t, saved.ptr, saved.type, dy, n);
  if (e == Epilogue::BiasTanh) tanh_backward_typed(dpre, t, saved.ptr, saved.type, dy, n);
}

}  // namespace

void CpuBackend::run(const LinearBackwardArgs& a) {
  // 16-bit dW, db (+=) or dx (+=); an activation's derivative reads an fp32 dy.
  if (widened(a, [&](std::string_view n) {
        return n == "dw" || n == "db" || (n == "dx" && a.dx_accumulate) ||
               (n == "dy" && has_activation(a.epilogue));
      }))
    return;
  const int N = as_int(a.x.dim(0)), K = as_int(a.x.dim(1)), M = as_int(a.w.dim(1));
  const ComputeType math = a.math;
  const size_t NM = static_cast<size_t>(N) * M;
  // The upstream gradient as the two GEMMs read it. Through GELU: d(pre) = gelu'(pre)·dy,
  // written once in the arithmetic's operand storage. Otherwise, when both GEMMs read dy, it is
  // not in their format yet and the caller planned room for it, it is converted once here;
  // else each GEMM converts it (the same values).
  GemmOperand dy = operand(a.dy);
  if (has_activation(a.epilogue)) {
    const StorageType t = ws_.operand_storage(math);
    MPT_CHECK(
        a.scratch.ptr != a.dy.ptr || (t == F32 && a.pre.type == F32),
        "[backend cpu] linear_activation_backward: d(pre) in place needs fp32 operands and an fp32 pre");
    void* dpre = scratch_or_own(a.scratch, 1, NM * storage_bytes(t));
    activation_backward(a.epilogue, dpre, t, a.pre, a.dy.as<float>(), NM);
    dy = {dpre, t, GemmLayout{0, 0, M, 1}};  // not `ready`: TF32 and emulated fp16 still round it
  } else if (!a.dx.empty() && a.dy.contiguous() && !a.scratch.empty() &&
             a.scratch.bytes() >= NM * storage_bytes(ws_.operand_storage(math)) &&
             (a.dy.type != ws_.operand_storage(math) || math == ComputeType::TF32 ||
              (math == ComputeType::F16 && a.dy.type == F32))) {
    const StorageType t = ws_.operand_storage(math);
    void* d = a.scratch.ptr;
    to_gemm_operand(d, a.dy.ptr, a.dy.type, NM, math, ws_);
    dy = {d, t, GemmLayout{0, 0, M, 1}, true};
  }
  GemmOperand wT = operand(a.w.t());
  wT.ready = a.w_rounded;
  // dx[N,K] (=) dy[N,M]·w^T
  if (!a.dx.empty())
    gemm_mixed(a.dx.ptr, a.dx.type, layout(a.dx), dy, wT, math, 1, 1, N, K, M, a.dx_accumulate, ws_, ctx_);
  // Through the activation x came from: dx (=) act'(x_pre)·dx, from dx's rounded values, as that
  // linear's own backward would have computed its d(pre) from this dx.
  if (has_activation(a.x_epilogue)) {
    MPT_CHECK(a.dx.contiguous() && a.x_pre.contiguous(),
              "[backend cpu] linear_backward: x_epilogue needs a contiguous dx and x_pre");
    const size_t NK = static_cast<size_t>(N) * K;
    float* g = a.dx.type == F32 ? a.dx.as<float>() : static_cast<float*>(scratch(0, NK * sizeof(float)));
    if (a.dx.type != F32) convert(g, F32, a.dx.ptr, a.dx.type, NK);
    activation_backward(a.x_epilogue, a.dx.ptr, a.dx.type, a.x_pre, g, NK);
  }
  // dw[K,M] (+=) x^T·dy; a transposed dw (nn.Linear's [M,K]) as dw^T[M,K] (+=) dy^T·x.
  const GemmOperand dyT{dy.ptr, dy.type, {0, 0, dy.layout.col, dy.layout.row}, dy.ready};
  if (a.dw.stride[1] == 1 || a.dw.stride[0] != 1)
    gemm_mixed(a.dw.ptr, F32, layout(a.dw), operand(a.x.t()), dy, math, 1, 1, K, M, N, true, ws_, ctx_);
  else
    gemm_mixed(a.dw.ptr, F32, layout(a.dw.t()), dyT, operand(a.x), math, 1, 1, M, K, N, true, ws_, ctx_);
  // db sums the gradient as it arrived (fp32 stays fp32), or d(pre) as the GEMMs read it.
  if (!a.db.empty()) {
    const bool through_gelu = has_activation(a.epilogue);
    MPT_CHECK(through_gelu || a.dy.contiguous(), "[backend cpu] linear_backward: db needs a contiguous dy");
    bias_backward_typed(a.db.as<float>(), through_gelu ? dy.ptr : a.dy.ptr,
                        through_gelu ? dy.type : a.dy.type, N, M);
  }
}

void CpuBackend::run(const LayerNormArgs& a) {
  if (widened(a, [](std::string_view n) { return n != "out"; })) return;  // out: any storage
  const NormRows r = NormRows::of(a.x);
  layernorm_forward_typed(a.out.ptr, a.out.type, a.mean.as<float>(), a.rstd.as<float>(), a.x.as<float>(),
                          a.gamma.as<float>(), a.beta.as<float>(), as_int(r.rows), as_int(r.C), a.eps, a.rms,
                          r.groups, r.stride);
}

void CpuBackend::run(const LayerNormBackwardArgs& a) {
  if (widened(a, every_view)) return;
  const NormRows r = NormRows::of(a.x);
  cpu::layernorm_backward(a.dx.as<float>(), a.dgamma.as<float>(), a.dbeta.as<float>(), a.dout.as<float>(),
                          a.x.as<float>(), a.gamma.as<float>(), a.mean.as<float>(), a.rstd.as<float>(),
                          as_int(r.rows), as_int(r.C), a.rms, r.groups, r.stride, a.accumulate);
}

void CpuBackend::run(const AttentionArgs& a) {
  attention_forward_typed(a.out.ptr, a.saved.ptr, a.qkv.ptr, a.scratch.ptr, typed(a.types), a.B, a.T,
                          as_int(a.out.dim(1)), a.NH, ws_, ctx_, a.causal, a.key_mask.as<const int>(),
                          a.cu_seqlens.as<const int>(), a.kv_heads);
}

void CpuBackend::run(const AttentionBackwardArgs& a) {
  attention_backward_typed(a.dqkv.ptr, a.dout.ptr, a.qkv.ptr, a.saved.ptr, a.scratch.ptr, typed(a.types), a.B,
                           a.T, as_int(a.dout.dim(1)), a.NH, ws_, ctx_, a.causal,
                           a.cu_seqlens.as<const int>(), a.kv_heads);
}

void CpuBackend::run(const CrossEntropyArgs& a) {
  // 16-bit logits (dlogits in place in them), or the sampled loss's 16-bit dlogits.
  if (widened(a, [&](std::string_view n) {
        return n == "logits" || (n == "dlogits" && (a.dlogits.ptr == a.logits.ptr || !a.sampled.empty()));
      }))
    return;
  const int N = as_int(a.logits.dim(0)), Vp = as_int(a.logits.dim(1));
  const float* dloss = a.dloss.empty() ? nullptr : a.dloss.as<float>();
  if (!a.sampled.empty()) {
    crossentropy_sampled_forward_backward(a.losses.as<float>(), a.dlogits.as<float>(), a.sampled.as<int>(),
                                          a.logits.as<float>(), dloss, N, a.vocab, Vp, a.seed, a.counter);
    return;
  }
  if (a.dlogits.empty() || a.dlogits.type == F32)
    crossentropy_forward_backward(a.losses.as<float>(), a.dlogits.empty() ? nullptr : a.dlogits.as<float>(),
                                  a.logits.as<float>(), a.targets.as<const int>(), dloss, N, a.vocab, Vp);
  else
    crossentropy_forward_backward_typed(a.losses.as<float>(), a.dlogits.ptr, a.dlogits.type,
                                        a.logits.as<float>(), a.targets.as<const int>(), dloss, N, a.vocab,
                                        Vp);
}

void CpuBackend::run(const EmbeddingArgs& a) {
  if (widened(a, every_view)) return;
  const int C = as_int(a.word.dim(1));
  embeddings_forward(a.out.as<float>(), a.tokens.as<const int>(), a.types.as<const int>(), a.word.as<float>(),
                     a.pos.as<float>(), !a.types.empty() ? a.type_table.as<float>() : nullptr, a.B, a.T, C,
                     a.cu_seqlens.as<const int>());
}

void CpuBackend::run(const EmbeddingBackwardArgs& a) {
  if (widened(a, every_view)) return;
  const int C = as_int(a.dword.dim(1));
  embeddings_backward(a.dword.as<float>(), a.dpos.as<float>(),
                      !a.types.empty() ? a.dtype.as<float>() : nullptr, a.dout.as<float>(),
                      a.tokens.as<const int>(), a.types.as<const int>(), a.pad_token, a.B, a.T, C,
                      a.cu_seqlens.as<const int>());
}

namespace {

// A row index outside the big tensor's rows, refused before any row moves.
void check_row_indices(const char* op, const int* rows, int count, std::int64_t n) {
  for (int r = 0; r < count; ++r)
    MPT_CHECK(rows[r] >= 0 && rows[r] < n, std::string("[backend cpu] ") + op + ": row index " +
                                               std::to_string(rows[r]) + " is outside [0, " +
                                               std::to_string(n) + ")");
}

}  // namespace

void CpuBackend::run(const GatherRowsArgs& a) {
  const int* rows = a.rows.as<const int>();
  const int count = as_int(a.rows.dim(0));
  check_row_indices("gather_rows", rows, count, a.src.dim(0));
  const size_t C = static_cast<size_t>(a.src.dim(1)), ed = storage_bytes(a.dst.type),
               es = storage_bytes(a.src.type);
  char* d = static_cast<char*>(a.dst.ptr);
  for (int r = 0; r < count; ++r)
    convert(d + static_cast<size_t>(r) * C * ed, a.dst.type,
            static_cast<const char*>(a.src.ptr) + static_cast<size_t>(rows[r]) * C * es, a.src.type, C);
  std::memset(d + static_cast<size_t>(count) * C * ed, 0,
              (static_cast<size_t>(a.dst.dim(0)) - count) * C * ed);
}

void CpuBackend::run(const ScatterAddRowsArgs& a) {
  if (widened(a, every_view)) return;  // the fp32 call checks the rows before any write-back
  const int* rows = a.rows.as<const int>();
  const int count = as_int(a.rows.dim(0));
  check_row_indices("scatter_add_rows", rows, count, a.dst.dim(0));
  const size_t C = static_cast<size_t>(a.dst.dim(1));
  for (int r = 0; r < count; ++r) {
    float* d = a.dst.as<float>() + static_cast<size_t>(rows[r]) * C;
    const float* s = a.src.as<float>() + static_cast<size_t>(r) * C;
    for (size_t c = 0; c < C; ++c) d[c] += s[c];
  }
}

void CpuBackend::run(const ArgmaxRowsArgs& a) {
  if (widened(a, every_view)) return;
  const size_t stride = static_cast<size_t>(a.x.dim(1));
  for (int r = 0; r < as_int(a.best.dim(0)); ++r) {
    const float* row = a.x.as<float>() + static_cast<size_t>(r) * stride;
    int b = 0;
    for (int i = 1; i < a.n; ++i)
      if (row[i] > row[b]) b = i;
    a.best.as<int>()[r] = b;
  }
}

// --- the optimizer's kernels (backend/ops/optimizer.h) ---

void CpuBackend::run(const AdamWArgs& a) {
  adamw_update(a.params.as<float>(), a.grads.as<float>(), a.m.as<float>(), a.v.as<float>(),
               static_cast<size_t>(a.params.numel()), a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, a.t,
               a.grad_scale, a.decay_mask.as<const std::uint32_t>(), {a.copy.ptr, a.copy.type, a.math});
}

void CpuBackend::run(const SophiaArgs& a) {
  sophia_update(a.params.as<float>(), a.grads.as<float>(), a.m.as<float>(), a.h.as<float>(),
                static_cast<size_t>(a.params.numel()), a.lr, a.beta1, a.rho_b, a.weight_decay, a.grad_scale,
                a.decay_mask.as<const std::uint32_t>());
}

void CpuBackend::run(const SophiaHessianArgs& a) {
  sophia_hessian_update(a.h.as<float>(), a.ghat.as<float>(), static_cast<size_t>(a.h.numel()), a.beta2);
}

std::int64_t CpuBackend::run(const CountUnclippedArgs& a) {
  return static_cast<std::int64_t>(
      sophia_unclipped_count(a.m.as<float>(), a.h.as<float>(), static_cast<size_t>(a.m.numel()), a.rho_b));
}

bool CpuBackend::run(const UnscaleCheckArgs& a) {
  return cpu::unscale_and_check(a.grads.as<float>(), static_cast<size_t>(a.grads.numel()), a.inv_scale);
}

double CpuBackend::run(const SumSquaresArgs& a) {
  return sum_of_squares(a.x.as<float>(), static_cast<size_t>(a.x.numel()));
}

void CpuBackend::run(const RopeArgs& a) {
  if (widened(a, every_view)) return;
  cpu::rope(a.x.as<float>(), as_int(a.x.dim(0)), as_int(a.x.dim(1)), a.T, a.heads, a.head_size, a.theta, a.inverse);
}

void CpuBackend::run(const SwigluArgs& a) {
  if (widened(a, every_view)) return;
  cpu::swiglu_forward(a.out.as<float>(), a.gate_up.as<float>(), as_int(a.out.dim(0)), as_int(a.out.dim(1)));
}

void CpuBackend::run(const SwigluBackwardArgs& a) {
  if (widened(a, every_view)) return;
  cpu::swiglu_backward(a.dgate_up.as<float>(), a.dout.as<float>(), a.gate_up.as<float>(), as_int(a.dout.dim(0)),
                  as_int(a.dout.dim(1)));
}

void CpuBackend::run(const Relu2Args& a) {
  if (widened(a, every_view)) return;
  cpu::relu2_forward(a.out.as<float>(), a.x.as<float>(), static_cast<size_t>(a.x.numel()));
}

// Typed, row by row as the linear's GELU epilogue (gelu_rows_typed): its bits, erf form included.
void CpuBackend::run(const GeluArgs& a) {
  gelu_rows_typed(a.out.ptr, a.out.type, a.x.ptr, a.x.type, as_int(a.x.dim(0)), as_int(a.x.dim(1)),
                  a.erf ? GeluForm::Erf : GeluForm::Tanh);
}

// In fp32 (other storages widened around it).
void CpuBackend::run(const Fp8CastArgs& a) {
  if (widened(a, every_view)) return;
  cpu::fp8_cast(a.out.as<float>(), a.x.as<float>(), static_cast<size_t>(a.x.numel()), a.scale, a.format,
                a.saturate);
}

double CpuBackend::run(const AmaxArgs& a) {
  return cpu::amax(a.x.as<float>(), static_cast<size_t>(a.x.numel()));
}

void CpuBackend::run(const Relu2BackwardArgs& a) {
  if (widened(a, every_view)) return;
  cpu::relu2_backward(a.dx.as<float>(), a.dout.as<float>(), a.x.as<float>(),
                      static_cast<size_t>(a.x.numel()));
}

void CpuBackend::run(const ScaleArgs& a) {
  cpu::scale(a.x.as<float>(), static_cast<size_t>(a.x.numel()), a.factor);
}

}  // namespace mptrain::cpu

namespace mptrain::cpu {

// alpha and beta around the product: straight into c when they are BLAS's defaults for a c the
// GEMM can write (or accumulate into), else the fp32 product in scratch, then one pass.
void CpuBackend::run(const MatmulArgs& a) {
  const int M = as_int(a.c.dim(0)), N = as_int(a.c.dim(1)), K = as_int(a.a.dim(1));
  const size_t n = static_cast<size_t>(M) * N;
  const bool plain = a.alpha == 1.0f && (a.beta == 0.0f || (a.beta == 1.0f && a.c.type == F32));
  if (plain) {
    gemm_mixed(a.c.ptr, a.c.type, layout(a.c), operand(a.a), operand(a.b), a.math, 1, 1, M, N, K,
               a.beta == 1.0f, ws_, ctx_);
    return;
  }
  auto* acc = static_cast<float*>(scratch(0, n * sizeof(float)));
  gemm_mixed(acc, F32, GemmLayout{0, 0, N, 1}, operand(a.a), operand(a.b), a.math, 1, 1, M, N, K, false, ws_,
             ctx_);
  if (a.c.type == F32) {
    scale_add(a.c.as<float>(), acc, n, a.alpha, a.beta);
    return;
  }
  auto* wide = static_cast<float*>(scratch(1, n * sizeof(float)));
  if (a.beta != 0.0f) convert(wide, F32, a.c.ptr, a.c.type, n);
  scale_add(wide, acc, n, a.alpha, a.beta);
  convert(a.c.ptr, a.c.type, wide, F32, n);
}

void CpuBackend::run(const MuonMomentumArgs& a) {
  cpu::muon_momentum(a.m.as<float>(), a.grads.as<float>(), a.u.as<float>(), a.u.dim(0), a.u.dim(1),
                     a.m.stride[0], a.mu, a.nesterov, a.grad_scale);
}

void CpuBackend::run(const MuonUpdateArgs& a) {
  if (widened(a, every_view)) return;
  cpu::muon_update(a.params.as<float>(), a.o.as<float>(), a.o.dim(0), a.o.dim(1), a.params.stride[0], a.lr,
                   a.weight_decay, a.scale);
}

}  // namespace mptrain::cpu
