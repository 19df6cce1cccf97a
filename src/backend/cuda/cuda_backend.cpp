// The CUDA backend: each op of the interface onto the launchers of this folder (cuda_backend.h).
// The public Backend entry points have already checked shapes and supports(); what is checked
// here is what only this backend needs (a GEMM operand's layout).
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/activations.h"
#include "backend/cuda/adamw.h"
#include "backend/cuda/attention.h"
#include "backend/cuda/cast.h"
#include "backend/cuda/check.h"
#include "backend/cuda/crossentropy.h"
#include "backend/cuda/dispatch.h"
#include "backend/cuda/embeddings.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/fp8.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/grad_norm.h"
#include "backend/cuda/layernorm.h"
#include "backend/cuda/loss_scale.h"
#include "backend/cuda/muon.h"
#include "backend/cuda/residual.h"
#include "backend/cuda/rope.h"
#include "backend/cuda/rows.h"
#include "backend/cuda/sophia.h"
#include "backend/device.h"
#include "core/error.h"

namespace mptrain {

std::unique_ptr<Backend> make_cuda_backend(int device, CudaOptions options) {
  return std::make_unique<cuda::CudaBackend>(device, options);
}

std::unique_ptr<Backend> make_cuda_sizing_backend() { return cuda::CudaBackend::sizing_only(); }

namespace cuda {

namespace {

// scratch() slots: each use has its own, so that two live at once never share memory.
enum Slot : int {
  kLinearOut = 0,
  kDpre,
  kLayerNorm,
  kEmbedding,
  kFlag,
  kNorm,
  kBiasGrad,
  kMask,
  kGroupedQkv,   // grouped-query attention: the heads expanded to multi-head qkv
  kGroupedDqkv,  // and their gradient
  kGroupedSum,   // a key/value head's gradient summed over its group
};
static_assert(kGroupedSum < 11, "CudaBackend::kSlots");

constexpr StorageType F32 = StorageType::F32;

// The product arithmetic a storage type's GEMMs run in here.
bool math_fits(StorageType t, ComputeType m) {
  switch (t) {
    case StorageType::F32:
      return m == ComputeType::F32 || m == ComputeType::TF32;
    case StorageType::BF16:
      return m == ComputeType::BF16;
    case StorageType::F16:
      return m == ComputeType::F16;
    case StorageType::I32:
      break;
  }
  return false;
}

size_t count(const View& v) { return static_cast<size_t>(v.numel()); }

// How a GEMM reads a [rows, cols] operand view: stored as is (row-major), or as the transpose
// of a row-major [cols, rows] tensor (View::t()). Anything else has no cuBLASLt layout here.
bool transposed(const View& v, const char* op, const char* name) {
  if (v.stride[1] == 1 && v.stride[0] == v.dim(1)) return false;
  if (v.stride[0] == 1 && v.stride[1] == v.dim(0)) return true;
  throw Error(std::string("[backend cuda] ") + op + ": " + name + " " + v.describe() +
              " is neither row-major nor a transposed row-major tensor");
}

}  // namespace

// --- memory ---------------------------------------------------------------------------------

Context& DeviceMemoryResource::ctx() const {
  MPT_CHECK(ctx_ != nullptr, "[backend cuda] a sizing-only CUDA backend has no device memory");
  return *ctx_;
}

void* DeviceMemoryResource::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  Context& c = ctx();
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls are not blamed
    throw Error("out of GPU memory allocating " + std::to_string(bytes >> 20) + " MiB on " + c.info().name);
  }
  fill_bytes(p, 0, bytes, c);
  return p;
}

void DeviceMemoryResource::release(void* p, size_t) noexcept {
  if (!p) return;
  cudaStreamSynchronize(ctx_->stream());  // work still reading p finishes first
  cudaFree(p);
}

void DeviceMemoryResource::zero(void* p, size_t bytes) { fill_bytes(p, 0, bytes, ctx()); }

void DeviceMemoryResource::upload(void* dst, const void* host, size_t bytes) {
  if (bytes) copy_to_device(dst, host, bytes, ctx());
}

void DeviceMemoryResource::download(void* host, const void* src, size_t bytes) {
  if (bytes) copy_to_host(host, src, bytes, ctx());
  ctx().check_faults();  // what the kernels found in device memory, now that the host waits anyway
}

// --- the backend ----------------------------------------------------------------------------

CudaBackend::CudaBackend(int device, CudaOptions options)
    : ctx_(std::make_unique<Context>(device)), options_(options), mem_(ctx_.get()) {}

std::unique_ptr<CudaBackend> CudaBackend::sizing_only() {
  return std::unique_ptr<CudaBackend>(new CudaBackend(SizingOnly{}));
}

CudaBackend::~CudaBackend() = default;

bool CudaBackend::flash(int C, int NH, const AttentionDtypes& t) const {
  return options_.flash && flash_attention_supported(C, NH, t.qkv);
}

AttentionBytes CudaBackend::attention_bytes(int B, int T, int C, int NH, const AttentionDtypes& t) const {
  const size_t bt = static_cast<size_t>(B) * T;
  if (flash(C, NH, t)) {
    // The row log-sum-exps, then the key mask (the backward's interface has none), 64-byte
    // aligned pieces; the backward reads the forward's out from its arguments.
    const auto up = [](size_t b) { return (b + 63) / 64 * 64; };
    return {up(flash_attention_saved_bytes(B, T, NH)) + up(bt * sizeof(int)),
            flash_attention_scratch_bytes(B, T, NH)};
  }
  return {attention_saved_bytes(B, T, C, NH, t.qkv), attention_scratch_bytes(B, T, C, NH, t.qkv)};
}

// By name, what the launchers take (one storage type per launch unless said).
bool CudaBackend::can_run(const OpTypes& t) const {
  // The optional tensors `names`, where present, in type `want`.
  const auto absent_or = [&](std::initializer_list<const char*> names, StorageType want) {
    for (const char* n : names)
      if (t.has(n) && t[n] != want) return false;
    return true;
  };
  switch (t.op) {
    case Op::Cast:
      return t["dst"] == t["src"] || t["dst"] == F32 || t["src"] == F32;
    case Op::Accumulate:
      return t["dst"] == t["src"] || t["dst"] == F32;
    case Op::ToOperand:
      return t["src"] == F32 && t["dst"] == operand_storage(t.math);
    case Op::Linear:  // out may be fp32 (cuBLASLt's C) over 16-bit operands; the bias is read in C's type
      return t["w"] == t["x"] && (t["out"] == t["x"] || t["out"] == F32) && absent_or({"bias"}, t["out"]) &&
             math_fits(t["x"], t.math);
    case Op::LinearActivation:
    case Op::LinearResidual:
      return t.uniform() && math_fits(t["x"], t.math);
    case Op::LinearBackward:
    case Op::LinearActivationBackward:  // dw (and db) may be the fp32 master gradient
      return t["x"] == t["dy"] && t["w"] == t["dy"] && absent_or({"dx", "pre", "x_pre"}, t["dy"]) &&
             (t["dw"] == t["dy"] || t["dw"] == F32) && absent_or({"db"}, t["dw"]) &&
             math_fits(t["dy"], t.math);
    case Op::Attention:
    case Op::AttentionBackward:
      return t.uniform() && math_fits(t["qkv"], t.math);
    case Op::CrossEntropy:
    case Op::SampledCrossEntropy:
      return absent_or({"dlogits"}, t["logits"]);
    case Op::Matmul:  // c may be fp32 over 16-bit operands
      return t["a"] == t["b"] && (t["c"] == t["a"] || t["c"] == F32) && math_fits(t["a"], t.math);
    case Op::MuonUpdate:  // o in any storage
      return t["params"] == F32;
    case Op::AdamW:  // the update's fused weight copy is the CPU kernel's only, for now
      return !t.has("copy") && t.uniform() && t.named[0].second == F32;
    case Op::Sophia:
    case Op::SophiaHessian:
    case Op::CountUnclipped:
    case Op::UnscaleCheck:
    case Op::SumSquares:
    case Op::Amax:
    case Op::Scale:
    case Op::MuonMomentum:
      return t.uniform() && t.named[0].second == F32;
    default:  // LayerNorm and its backward, embeddings, rows
      return t.uniform();
  }
}

void* CudaBackend::scratch(int slot, size_t bytes) {
  DeviceMemory& m = scratch_[slot];
  if (m.bytes() < bytes) {
    // cudaMalloc inside a stream capture would fail the capture (or, relaxed, leave a graph
    // whose replays outlive nothing): a shape's first run is eager and sizes every slot.
    MPT_CHECK(!capturing(), "[backend cuda] scratch slot " + std::to_string(slot) + " would grow to " +
                                std::to_string(bytes) +
                                " bytes while capturing a graph: run the shape eagerly once first");
    // A captured graph may still point at the smaller area: it stays allocated (growth is rare).
    if (m.get()) retired_.push_back(std::move(m));
    m = DeviceMemory(bytes);
  }
  return m.get();
}

const std::uint32_t* CudaBackend::all_decay(size_t n) {
  if (mask_n_ < n) {
    MPT_CHECK(!capturing(), "[backend cuda] the optimizer's decay mask is uploaded eagerly, not in a graph");
    const std::vector<std::uint32_t> mask = decay_mask_bits(n, {{0, n}});
    void* p = scratch(kMask, mask.size() * sizeof(std::uint32_t));
    copy_to_device(p, mask.data(), mask.size() * sizeof(std::uint32_t), *ctx_);
    mask_n_ = n;
  }
  return static_cast<const std::uint32_t*>(scratch_[kMask].get());
}

void CudaBackend::run(const CastArgs& a) {
  const View &dst = a.dst, &src = a.src;
  const size_t n = count(dst);
  if (dst.type == src.type) {
    copy_device(dst.ptr, src.ptr, dst.bytes(), *ctx_);
  } else if (src.type == F32) {
    if (dst.type == StorageType::BF16)
      cuda::cast<Bf16, float>(dst.as<Bf16>(), src.as<float>(), n, ctx_->stream());
    else
      cuda::cast<Fp16, float>(dst.as<Fp16>(), src.as<float>(), n, ctx_->stream());
  } else if (src.type == StorageType::BF16) {
    cuda::cast<float, Bf16>(dst.as<float>(), src.as<Bf16>(), n, ctx_->stream());
  } else {
    cuda::cast<float, Fp16>(dst.as<float>(), src.as<Fp16>(), n, ctx_->stream());
  }
}

void CudaBackend::run_zero(const View& v) { fill_bytes(v.ptr, 0, v.bytes(), *ctx_); }

void CudaBackend::run(const AccumulateArgs& a) {
  const View &dst = a.dst, &src = a.src;
  const size_t n = count(dst);
  dispatch_storage(src.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dst.type == src.type)
      cuda::accumulate<T>(static_cast<T*>(dst.ptr), static_cast<const T*>(src.ptr), n, *ctx_);
    else  // fp32 += 16-bit, widened as it is read
      cuda::accumulate_widening<T>(dst.as<float>(), static_cast<const T*>(src.ptr), n, *ctx_);
  });
}

void CudaBackend::run(const ToOperandArgs& a) {
  // A TF32 copy holds the values the products read (cuBLASLt rounds its own operands, but the
  // interface's copy is the rounded one, as the CPU's is; conformance found the plain copy).
  if (a.math == ComputeType::TF32 && a.dst.type == F32 && a.src.type == F32) {
    cuda::round_tf32(a.dst.as<float>(), a.src.as<float>(), count(a.dst), *ctx_);
    return;
  }
  run(CastArgs{a.dst, a.src});
}

namespace {

// The activation of an epilogue that has one (GELU, tanh form; GELU, erf form; tanh) over n
// elements of storage t: out = act(x), or with dy, out = act'(x)·dy (tanh: x is its output).
void activation(Epilogue e, StorageType t, void* out, const void* x, const void* dy, size_t n, Context& ctx) {
  dispatch_storage(t, [&](auto tag) {
    using S = typename decltype(tag)::type;
    auto* o = static_cast<S*>(out);
    const auto *in = static_cast<const S*>(x), *g = static_cast<const S*>(dy);
    if (e == Epilogue::BiasGelu)
      return g ? gelu_backward<S>(o, in, g, n, ctx) : gelu_forward<S>(o, in, n, ctx);
    if (e == Epilogue::BiasGeluErf)
      return g ? gelu_erf_backward<S>(o, in, g, n, ctx) : gelu_erf_forward<S>(o, in, n, ctx);
    g ? tanh_backward<S>(o, in, g, n, ctx) : tanh_forward<S>(o, in, n, ctx);
  });
}

}  // namespace

void CudaBackend::run(const LinearArgs& a) {
  const int N = static_cast<int>(a.x.dim(0)), K = static_cast<int>(a.x.dim(1)),
            M = static_cast<int>(a.w.dim(1));
  const bool wt = transposed(a.w, "linear", "w");
  const StorageType T = a.x.type;
  const ComputeType mm = a.math;
  const auto product = [&](void* out, StorageType to, bool accumulate, const GemmEpilogue& ep) {
    gemm(out, to, a.x.ptr, a.w.ptr, T, N, M, K, false, wt, accumulate, mm, ep, *ctx_);
  };
  const GemmEpilogue bias{a.bias.empty() ? LtEpilogue::None : LtEpilogue::Bias, a.bias.ptr, nullptr, nullptr};
  const size_t n = static_cast<size_t>(N) * M;
  switch (a.epilogue) {
    case mptrain::Epilogue::Bias:
      product(a.out.ptr, a.out.type, false, bias);
      return;
    case mptrain::Epilogue::BiasGelu:  // cuBLASLt's GELU epilogue is the tanh form
      // cuBLASLt's GELU epilogue stores `pre` with a leading dimension that must be a multiple of 8:
      // other widths take the bias epilogue and GELU's own kernel (conformance's tails found it).
      if (options_.fuse && M % 8 == 0) {
        product(a.out.ptr, T, false, {LtEpilogue::GeluBias, a.bias.ptr, nullptr, a.pre.ptr});
        return;
      }
      [[fallthrough]];
    case mptrain::Epilogue::BiasGeluErf:
      product(a.pre.ptr, T, false, bias);
      activation(a.epilogue, T, a.out.ptr, a.pre.ptr, nullptr, n, *ctx_);
      return;
    case mptrain::Epilogue::BiasTanh:  // in place: the backward reads tanh's output
      product(a.out.ptr, T, false, bias);
      activation(a.epilogue, T, a.out.ptr, a.out.ptr, nullptr, n, *ctx_);
      return;
    case mptrain::Epilogue::BiasResidual:
      if (a.out.ptr != a.residual.ptr) copy_device(a.out.ptr, a.residual.ptr, a.out.bytes(), *ctx_);
      if (a.rounding == F32) {
        // out = round(residual + x·w + b): the product accumulates into C, which holds the residual.
        product(a.out.ptr, T, true, bias);
        return;
      }
      // out = round(residual + round_to(rounding)(x·w + b)), the op's two roundings (the linear's
      // 16-bit output, then the add, as autocast and the CPU round): the product lands in scratch
      // first. One more pass over [N, M] than accumulating into C, which would round once.
      MPT_CHECK(a.rounding == T, "[backend cuda] linear_residual: rounding " +
                                     std::string(storage_name(a.rounding)) + " over " + storage_name(T) +
                                     " operands has no kernel here");
      dispatch_storage(T, [&](auto tag) {
        using S = typename decltype(tag)::type;
        auto* y = static_cast<S*>(scratch(kLinearOut, n * sizeof(S)));
        product(y, T, false, bias);
        cuda::accumulate<S>(static_cast<S*>(a.out.ptr), y, n, *ctx_);
      });
      return;
  }
}

void CudaBackend::run(const LinearBackwardArgs& a) {
  const int N = static_cast<int>(a.x.dim(0)), K = static_cast<int>(a.x.dim(1)),
            M = static_cast<int>(a.w.dim(1));
  const bool wt = transposed(a.w, "linear_backward", "w");
  const StorageType T = a.dy.type;
  const ComputeType mm = a.math;
  const size_t n = static_cast<size_t>(N) * M;
  // The gradient the GEMMs read: dy, or d(pre) through the activation's derivative.
  const void* g = a.dy.ptr;
  if (has_activation(a.epilogue)) {
    void* dpre =
        a.scratch.bytes() >= n * storage_bytes(T) ? a.scratch.ptr : scratch(kDpre, n * storage_bytes(T));
    activation(a.epilogue, T, dpre, a.pre.ptr, a.dy.ptr, n, *ctx_);  // BiasTanh: pre holds tanh's output
    g = dpre;
  }
  const GemmEpilogue none{};
  // dx[N,K] (= or +=) g[N,M]·w^T; through x's activation, act'(x_pre) ⊙ that: in the product's
  // epilogue for the tanh GELU (cuBLASLt's DGELU: the fp32 product, one rounding; its aux needs
  // K % 8 == 0, as the forward's), else the activation's own kernel in place after it.
  if (!a.dx.empty()) {
    const bool through = has_activation(a.x_epilogue);
    const bool fused = through && options_.fuse && a.x_epilogue == mptrain::Epilogue::BiasGelu &&
                       K % 8 == 0 && T != F32 && a.dx.type == T && a.x_pre.type == T;
    const GemmEpilogue dgelu{LtEpilogue::DGelu, nullptr, nullptr, a.x_pre.ptr};
    gemm(a.dx.ptr, a.dx.type, g, a.w.ptr, T, N, K, M, false, !wt, a.dx_accumulate, mm, fused ? dgelu : none,
         *ctx_);
    if (through && !fused) {
      MPT_CHECK(a.dx.type == a.x_pre.type,
                "[backend cuda] linear_backward: x_epilogue needs dx and x_pre in one dtype");
      const size_t nk = static_cast<size_t>(N) * K;
      activation(a.x_epilogue, a.dx.type, a.dx.ptr, a.x_pre.ptr, a.dx.ptr, nk, *ctx_);
    }
  }
  // dw (+=): x^T·g into [K,M], or, for a transposed dw ([M,K] storage), g^T·x.
  if (transposed(a.dw, "linear_backward", "dw"))
    gemm(a.dw.ptr, a.dw.type, g, a.x.ptr, T, M, K, N, true, false, true, mm, none, *ctx_);
  else
    gemm(a.dw.ptr, a.dw.type, a.x.ptr, g, T, K, M, N, true, false, true, mm, none, *ctx_);
  // db[M] (+=) the column sums of g.
  if (!a.db.empty()) {
    void* work = scratch(kBiasGrad, bias_grad_scratch_bytes(N, M));
    dispatch_storage(T, [&](auto tag) {
      using S = typename decltype(tag)::type;
      if (a.db.type == F32)
        bias_grad<S, float>(a.db.as<float>(), static_cast<const S*>(g), N, M, work, *ctx_);
      else
        bias_grad<S, S>(static_cast<S*>(a.db.ptr), static_cast<const S*>(g), N, M, work, *ctx_);
    });
  }
}

namespace {
cuda::NormLayout norm_layout(const NormRows& r, bool accumulate = true) {
  return {r.groups, r.stride, accumulate};
}
}  // namespace

void CudaBackend::run(const LayerNormArgs& a) {
  const NormRows r = NormRows::of(a.x);
  const int N = static_cast<int>(r.rows), C = static_cast<int>(r.C);
  dispatch_storage(a.x.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto in = [](const View& v) { return static_cast<const T*>(v.ptr); };
    layernorm_forward<T>(static_cast<T*>(a.out.ptr), a.mean.as<float>(), a.rstd.as<float>(), in(a.x),
                         in(a.gamma), in(a.beta), N, C, a.eps, a.rms, *ctx_, norm_layout(r));
  });
}

void CudaBackend::run(const LayerNormBackwardArgs& a) {
  const NormRows r = NormRows::of(a.x);
  const int N = static_cast<int>(r.rows), C = static_cast<int>(r.C);
  float* work =
      static_cast<float*>(scratch(kLayerNorm, layernorm_backward_scratch_floats(N, C) * sizeof(float)));
  dispatch_storage(a.x.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto in = [](const View& v) { return static_cast<const T*>(v.ptr); };
    cuda::layernorm_backward<T>(static_cast<T*>(a.dx.ptr), static_cast<T*>(a.dgamma.ptr),
                                static_cast<T*>(a.dbeta.ptr), in(a.dout), in(a.x), in(a.gamma),
                                a.mean.as<float>(), a.rstd.as<float>(), work, N, C, a.rms, *ctx_,
                                norm_layout(r, a.accumulate));
  });
}

namespace {

// Where a flash forward keeps what its backward needs inside `saved` (attention_bytes' layout).
struct FlashSaved {
  float* lse;
  int* mask;
};
FlashSaved flash_saved(const View& saved, int B, int T, int NH) {
  const auto up = [](size_t b) { return (b + 63) / 64 * 64; };
  char* p = static_cast<char*>(saved.ptr);
  return {reinterpret_cast<float*>(p), reinterpret_cast<int*>(p + up(flash_attention_saved_bytes(B, T, NH)))};
}

// Grouped-query attention (kv_heads below NH) on the multi-head kernels, which read three C-wide
// parts of qkv: each key/value head is copied into the place of its group's query heads (strided
// 2-D copies: no kernel of its own), the kernels run on that [rows, 3C] copy, and backward sums a
// group's dK and dV back into its head (member 0 copied, the others added in member order, one
// rounding per add). Memory and copies: 2·(NH − KV)·HS per row more than a fused kernel would move.
struct GroupedHeads {
  int NH, KV, HS, rows;  // KV 0: multi-head (no expansion)
  size_t elem;           // bytes of an element
  bool grouped() const { return KV > 0 && KV < NH; }
  int G() const { return NH / KV; }
  size_t C() const { return static_cast<size_t>(NH) * HS; }
  size_t W() const { return C() + 2 * static_cast<size_t>(KV) * HS; }  // a grouped qkv row
  // Bytes into a grouped row of key (part 1) or value (part 2) head j, and into a [rows, 3C] row
  // of query head h's key or value.
  size_t grouped_at(int part, int j) const {
    return (C() + static_cast<size_t>(part - 1) * KV * HS + static_cast<size_t>(j) * HS) * elem;
  }
  size_t full_at(int part, int h) const {
    return (static_cast<size_t>(part) * C() + static_cast<size_t>(h) * HS) * elem;
  }
  size_t full_bytes() const { return static_cast<size_t>(rows) * 3 * C() * elem; }  // a [rows, 3C] area
};

// `height` rows of `width` bytes between pitched buffers, on the context's stream.
void copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
               Context& ctx) {
  MPT_CUDA_CHECK(
      cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice, ctx.stream()));
}

// The qkv the multi-head kernels read: qkv itself, or for grouped heads qkv [rows, W] expanded into
// `full` [rows, 3C] (q as it is, key/value head h / G in query head h's place), which it returns.
const void* expand_heads(void* full, const void* qkv, const GroupedHeads& g, Context& ctx) {
  if (!g.grouped()) return qkv;
  const size_t W = g.W() * g.elem, F = 3 * g.C() * g.elem, hs = g.HS * g.elem;
  auto* f = static_cast<char*>(full);
  const auto* q = static_cast<const char*>(qkv);
  copy_rows(f, F, q, W, g.C() * g.elem, g.rows, ctx);
  for (int part = 1; part <= 2; ++part)
    for (int h = 0; h < g.NH; ++h)
      copy_rows(f + g.full_at(part, h), F, q + g.grouped_at(part, h / g.G()), W, hs, g.rows, ctx);
  return full;
}

// dfull [rows, 3C] → dqkv [rows, W]: dq as it is, each key/value head the sum of its group's;
// work holds two [rows, HS] areas (the running sum, the next member).
template <class T>
void reduce_heads(void* dqkv, const void* dfull, T* work, const GroupedHeads& g, Context& ctx) {
  const size_t W = g.W() * g.elem, F = 3 * g.C() * g.elem, hs = g.HS * g.elem;
  const size_t n = static_cast<size_t>(g.rows) * g.HS;
  auto* d = static_cast<char*>(dqkv);
  const auto* f = static_cast<const char*>(dfull);
  copy_rows(d, W, f, F, g.C() * g.elem, g.rows, ctx);
  T *sum = work, *next = work + n;
  for (int part = 1; part <= 2; ++part)
    for (int j = 0; j < g.KV; ++j) {
      copy_rows(sum, hs, f + g.full_at(part, j * g.G()), F, hs, g.rows, ctx);
      for (int m = 1; m < g.G(); ++m) {
        copy_rows(next, hs, f + g.full_at(part, j * g.G() + m), F, hs, g.rows, ctx);
        cuda::accumulate<T>(sum, next, n, ctx);
      }
      copy_rows(d + g.grouped_at(part, j), W, sum, hs, hs, g.rows, ctx);
    }
}

// The keys of an attention call (cuda/attention.h); the flash masked backward reads the mask its
// forward copied into `saved` (the backward's interface has none).
AttentionKeys attention_keys(bool causal, const View& cu_seqlens, int rows, const int* key_mask) {
  if (causal) return AttentionKeys::causal();
  if (!cu_seqlens.empty()) return AttentionKeys::packed(cu_seqlens.as<const int>(), rows);
  return AttentionKeys::masked(key_mask);
}

}  // namespace

// Packed sequences (a.cu_seqlens) run the flash kernels' packed form (out, lse per row and no key
// mask in attention_bytes' layout for attention_memory_batch) or the naive path's packed kernels.
void CudaBackend::run(const AttentionArgs& a) {
  const int C = static_cast<int>(a.out.dim(1)), rows = static_cast<int>(a.out.dim(0));
  const AttentionMath mm{a.types.scores, a.types.values};
  if (!a.cu_seqlens.empty()) check_packing(a.cu_seqlens.as<const int>(), a.B, a.T, rows, *ctx_);
  const AttentionKeys keys = attention_keys(a.causal, a.cu_seqlens, rows, a.key_mask.as<const int>());
  const GroupedHeads g{a.NH, a.kv_heads, C / a.NH, rows, storage_bytes(a.types.qkv)};
  const void* heads =
      expand_heads(g.grouped() ? scratch(kGroupedQkv, g.full_bytes()) : nullptr, a.qkv.ptr, g, *ctx_);
  dispatch_storage(a.types.qkv, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = static_cast<T*>(a.out.ptr);
    const T* qkv = static_cast<const T*>(heads);
    if (!flash(C, a.NH, a.types))
      return cuda::attention_forward<T>(out, a.saved.ptr, qkv, keys, a.scratch.ptr, a.B, a.T, C, a.NH, mm,
                                        *ctx_);
    const FlashSaved s =
        flash_saved(a.saved, attention_memory_batch(a.B, a.T, rows, !a.cu_seqlens.empty()), a.T, a.NH);
    flash_attention_forward<T>(out, s.lse, qkv, keys, a.B, a.T, C, a.NH, *ctx_);
    if (keys.form != AttentionKeys::Form::Masked) return;
    const size_t mask_bytes = static_cast<size_t>(a.B) * a.T * sizeof(int);
    if (keys.key_mask)
      copy_device(s.mask, keys.key_mask, mask_bytes, *ctx_);
    else
      fill_bytes(s.mask, 0xFF, mask_bytes, *ctx_);  // nonzero: all real
  });
}

void CudaBackend::run(const AttentionBackwardArgs& a) {
  const int C = static_cast<int>(a.dout.dim(1)), rows = static_cast<int>(a.dout.dim(0));
  const AttentionMath mm{a.types.scores, a.types.values};
  // Grouped heads: the forward's expansion again (other layers have used the area since), the
  // multi-head gradient into an area of its own, summed back over each group after.
  const GroupedHeads g{a.NH, a.kv_heads, C / a.NH, rows, storage_bytes(a.types.qkv)};
  const void* heads =
      expand_heads(g.grouped() ? scratch(kGroupedQkv, g.full_bytes()) : nullptr, a.qkv.ptr, g, *ctx_);
  void* dheads = g.grouped() ? scratch(kGroupedDqkv, g.full_bytes()) : a.dqkv.ptr;
  dispatch_storage(a.types.qkv, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dqkv = static_cast<T*>(dheads);
    const T* dout = static_cast<const T*>(a.dout.ptr);
    const T* qkv = static_cast<const T*>(heads);
    if (!flash(C, a.NH, a.types)) {
      const AttentionKeys keys = attention_keys(a.causal, a.cu_seqlens, rows, nullptr);
      cuda::attention_backward<T>(dqkv, dout, qkv, a.saved.ptr, keys, a.scratch.ptr, a.B, a.T, C, a.NH, mm,
                                  *ctx_);
    } else {
      const FlashSaved s =
          flash_saved(a.saved, attention_memory_batch(a.B, a.T, rows, !a.cu_seqlens.empty()), a.T, a.NH);
      flash_attention_backward<T>(dqkv, dout, qkv, static_cast<const T*>(a.out.ptr), s.lse,
                                  attention_keys(a.causal, a.cu_seqlens, rows, s.mask), a.scratch.ptr, a.B,
                                  a.T, C, a.NH, *ctx_);
    }
    if (g.grouped())  // the multi-head gradient summed back over each group into a.dqkv
      reduce_heads<T>(a.dqkv.ptr, dheads,
                      static_cast<T*>(scratch(kGroupedSum, 2 * static_cast<size_t>(rows) * g.HS * sizeof(T))),
                      g, *ctx_);
  });
}

void CudaBackend::run(const CrossEntropyArgs& a) {
  const int N = static_cast<int>(a.logits.dim(0)), Vp = static_cast<int>(a.logits.dim(1));
  dispatch_storage(a.logits.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dlogits = static_cast<T*>(a.dlogits.ptr);
    const T* logits = static_cast<const T*>(a.logits.ptr);
    const float* dloss = a.dloss.empty() ? nullptr : a.dloss.as<float>();
    if (!a.sampled.empty())
      crossentropy_sampled_forward_backward<T>(a.losses.as<float>(), dlogits, a.sampled.as<int>(), logits,
                                               dloss, N, a.vocab, Vp, a.seed, a.counter, *ctx_);
    else
      crossentropy_forward_backward<T>(a.losses.as<float>(), dlogits, logits, a.targets.as<const int>(),
                                       dloss, N, a.vocab, Vp, *ctx_);
  });
}

void CudaBackend::run(const EmbeddingArgs& a) {
  const int C = static_cast<int>(a.out.dim(1)), rows = static_cast<int>(a.out.dim(0));
  if (!a.cu_seqlens.empty()) check_packing(a.cu_seqlens.as<const int>(), a.B, a.T, rows, *ctx_);
  dispatch_storage(a.out.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto in = [](const View& v) { return static_cast<const T*>(v.ptr); };
    embeddings_forward<T>(static_cast<T*>(a.out.ptr), a.tokens.as<const int>(), a.types.as<const int>(),
                          in(a.word), in(a.pos), in(a.type_table), a.cu_seqlens.as<const int>(), a.B, a.T, C,
                          rows, *ctx_);
  });
}

void CudaBackend::run(const EmbeddingBackwardArgs& a) {
  const int C = static_cast<int>(a.dout.dim(1)), rows = static_cast<int>(a.dout.dim(0));
  if (!a.cu_seqlens.empty()) check_packing(a.cu_seqlens.as<const int>(), a.B, a.T, rows, *ctx_);
  // Sized for B·T rows whatever the layout: a packed batch's rows vary from batch to batch, and
  // the scratch then stays one size.
  const size_t bytes = embeddings_backward_scratch_bytes(a.B, a.T);
  void* work = scratch(kEmbedding, bytes);
  dispatch_storage(a.dout.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    embeddings_backward<T>(static_cast<T*>(a.dword.ptr), static_cast<T*>(a.dpos.ptr),
                           static_cast<T*>(a.dtype.ptr), static_cast<const T*>(a.dout.ptr),
                           a.tokens.as<const int>(), a.types.as<const int>(), a.cu_seqlens.as<const int>(),
                           a.pad_token, work, bytes, a.B, a.T, C, rows,
                           !a.types.empty() ? static_cast<int>(a.dtype.dim(0)) : 0, *ctx_);
  });
}

void CudaBackend::run(const GatherRowsArgs& a) {
  const View &dst = a.dst, &src = a.src;
  const int* rows = a.rows.as<const int>();
  const int n = static_cast<int>(a.rows.dim(0));
  dispatch_storage(dst.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::gather_rows<T>(static_cast<T*>(dst.ptr), static_cast<const T*>(src.ptr), rows, n,
                         static_cast<int>(dst.dim(0)), static_cast<int>(src.dim(0)),
                         static_cast<int>(src.dim(1)), *ctx_);
  });
}

void CudaBackend::run(const ScatterAddRowsArgs& a) {
  const View &dst = a.dst, &src = a.src;
  const int* rows = a.rows.as<const int>();
  const int n = static_cast<int>(a.rows.dim(0));
  dispatch_storage(dst.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::scatter_add_rows<T>(static_cast<T*>(dst.ptr), static_cast<const T*>(src.ptr), rows, n,
                              static_cast<int>(dst.dim(0)), static_cast<int>(dst.dim(1)), *ctx_);
  });
}

void CudaBackend::run(const ArgmaxRowsArgs& a) {
  dispatch_storage(a.x.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    row_argmax<T>(a.best.as<int>(), static_cast<const T*>(a.x.ptr), static_cast<int>(a.best.dim(0)), a.n,
                  static_cast<int>(a.x.stride[0]), *ctx_);
  });
}

void CudaBackend::run(const mptrain::AdamWArgs& a) {
  const cuda::AdamWArgs k{a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, a.t, a.grad_scale};
  const size_t n = count(a.params);
  adamw_update(a.params.as<float>(), a.grads.as<float>(), a.m.as<float>(), a.v.as<float>(),
               a.decay_mask.empty() ? all_decay(n) : a.decay_mask.as<const std::uint32_t>(), n, k, *ctx_);
}

void CudaBackend::run(const mptrain::SophiaArgs& a) {
  const cuda::SophiaArgs k{a.lr, a.beta1, a.rho_b, a.weight_decay, a.grad_scale};
  const size_t n = count(a.params);
  sophia_update(a.params.as<float>(), a.grads.as<float>(), a.m.as<float>(), a.h.as<float>(),
                a.decay_mask.empty() ? all_decay(n) : a.decay_mask.as<const std::uint32_t>(), n, k, *ctx_);
}

void CudaBackend::run(const SophiaHessianArgs& a) {
  sophia_hessian_update(a.h.as<float>(), a.ghat.as<float>(), count(a.h), a.beta2, *ctx_);
}

std::int64_t CudaBackend::run(const CountUnclippedArgs& a) {
  auto* c = static_cast<unsigned long long*>(scratch(kFlag, sizeof(unsigned long long)));
  sophia_unclipped_count(c, a.m.as<float>(), a.h.as<float>(), count(a.m), a.rho_b, *ctx_);
  unsigned long long host = 0;
  copy_to_host(&host, c, sizeof host, *ctx_);
  ctx_->check_faults();
  return static_cast<std::int64_t>(host);
}

bool CudaBackend::run(const UnscaleCheckArgs& a) {
  int* found = static_cast<int*>(scratch(kFlag, sizeof(unsigned long long)));
  fill_bytes(found, 0, sizeof(int), *ctx_);
  cuda::unscale_and_check(a.grads.as<float>(), count(a.grads), a.inv_scale, found, *ctx_);
  int host = 0;
  copy_to_host(&host, found, sizeof host, *ctx_);
  ctx_->check_faults();
  return host != 0;
}

double CudaBackend::run(const SumSquaresArgs& a) {
  auto* work = static_cast<double*>(scratch(kNorm, (sum_squares_scratch_doubles() + 1) * sizeof(double)));
  cuda::sum_squares(work, a.x.as<float>(), count(a.x), work + 1, *ctx_);
  double sum = 0.0;
  copy_to_host(&sum, work, sizeof sum, *ctx_);
  ctx_->check_faults();
  return sum;
}

void CudaBackend::run(const RopeArgs& a) {
  dispatch_storage(a.x.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::rope<T>(static_cast<T*>(a.x.ptr), static_cast<int>(a.x.dim(0)), static_cast<int>(a.x.dim(1)), a.T,
                  a.heads, a.head_size, a.theta, a.inverse, *ctx_);
  });
}

void CudaBackend::run(const SwigluArgs& a) {
  dispatch_storage(a.out.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    swiglu_forward<T>(static_cast<T*>(a.out.ptr), static_cast<const T*>(a.gate_up.ptr),
                      static_cast<int>(a.out.dim(0)), static_cast<int>(a.out.dim(1)), *ctx_);
  });
}

void CudaBackend::run(const Relu2Args& a) {
  dispatch_storage(a.x.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    relu2_forward<T>(static_cast<T*>(a.out.ptr), static_cast<const T*>(a.x.ptr), count(a.x), *ctx_);
  });
}

// The GELU kernels the unfused epilogues run (activation() above); out and x in one storage
// (can_run: uniform).
void CudaBackend::run(const GeluArgs& a) {
  activation(a.erf ? Epilogue::BiasGeluErf : Epilogue::BiasGelu, a.x.type, a.out.ptr, a.x.ptr, nullptr,
             count(a.x), *ctx_);
}

void CudaBackend::run(const Fp8CastArgs& a) {
  dispatch_storage(a.x.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::fp8_cast<T>(static_cast<T*>(a.out.ptr), static_cast<const T*>(a.x.ptr), count(a.x), a.scale,
                      a.format, a.saturate, *ctx_);
  });
}

double CudaBackend::run(const AmaxArgs& a) {
  auto* bits = static_cast<uint32_t*>(scratch(kNorm, sizeof(uint32_t)));
  cuda::amax_bits(bits, a.x.as<float>(), count(a.x), *ctx_);
  uint32_t host = 0;
  copy_to_host(&host, bits, sizeof host, *ctx_);
  ctx_->check_faults();
  return static_cast<double>(f32_from_bits(host));
}

void CudaBackend::run(const Relu2BackwardArgs& a) {
  dispatch_storage(a.x.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::relu2_backward<T>(static_cast<T*>(a.dx.ptr), static_cast<const T*>(a.x.ptr),
                            static_cast<const T*>(a.dout.ptr), count(a.x), *ctx_);
  });
}

void CudaBackend::run(const SwigluBackwardArgs& a) {
  dispatch_storage(a.dout.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::swiglu_backward<T>(static_cast<T*>(a.dgate_up.ptr), static_cast<const T*>(a.dout.ptr),
                             static_cast<const T*>(a.gate_up.ptr), static_cast<int>(a.dout.dim(0)),
                             static_cast<int>(a.dout.dim(1)), *ctx_);
  });
}

void CudaBackend::run(const ScaleArgs& a) { scale_in_place(a.x.as<float>(), count(a.x), a.factor, *ctx_); }

// Row-major views onto cuBLASLt's transposes: a contiguous operand as stored, the transpose of a
// contiguous one as op(X) = X^T of its storage (backend.cpp admits no other strides).
void CudaBackend::run(const mptrain::MatmulArgs& a) {
  const bool ta = !a.a.contiguous(), tb = !a.b.contiguous();
  gemm_scaled(a.c.ptr, a.c.type, a.a.ptr, a.b.ptr, a.a.type, static_cast<int>(a.c.dim(0)),
              static_cast<int>(a.c.dim(1)), static_cast<int>(a.a.dim(1)), ta, tb, a.alpha, a.beta,
              a.math == ComputeType::TF32 ? ComputeType::TF32 : ComputeType::F32, *ctx_);
}

void CudaBackend::run(const MuonMomentumArgs& a) {
  cuda::muon_momentum(a.m.as<float>(), a.grads.as<float>(), a.u.as<float>(), a.u.dim(0), a.u.dim(1),
                      a.m.stride[0], a.mu, a.nesterov, a.grad_scale, *ctx_);
}

void CudaBackend::run(const MuonUpdateArgs& a) {
  dispatch_storage(a.o.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::muon_update<T>(a.params.as<float>(), static_cast<const T*>(a.o.ptr), a.o.dim(0), a.o.dim(1),
                         a.params.stride[0], a.lr, a.weight_decay, a.scale, *ctx_);
  });
}

}  // namespace cuda
}  // namespace mptrain
