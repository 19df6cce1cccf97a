// The op interface, declared once: what a model asks of a backend, at the granularity both the
// CPU (oneDNN + OpenMP) and the GPU (cuBLASLt epilogues + own kernels) serve at full speed.
// Every op takes typed views (backend/view.h); every output says whether it is written (=) or
// accumulated (+=), and each op's Args struct lists its views once (views()). The public entry
// points check shapes and ask supports() with the call's own arguments first, so a combination a
// backend has no kernel for is refused with one line naming the op and the dtypes, the same on
// every backend; the backends implement only can_run() and one run() per Args (backend/op_list.h).
//
// Fused ops are ops here (bias + GELU and the residual add in a linear's epilogue, softmax +
// cross-entropy writing dlogits): each is an op of its own, as its kernel is.
//
// GPT-2, Llama and BERT run on it (model/gpt2_pass.cpp, model/llama_pass.cpp, model/bert_pass.cpp);
// the CPU backend (backend/cpu/cpu_backend.h) and the CUDA backend (backend/cuda/cuda_backend.h)
// serve it, each checked against float64 references on the cases its supports() accepts
// (tests/common/conformance.h). Its ops, their Args and their precision roles are listed once, in
// backend/op_list.h.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/op_list.h"
#include "backend/op_profile.h"
#include "backend/view.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "core/fp8.h"
#include "precision/caps.h"
#include "precision/op_role.h"

namespace mptrain {

// The ops, generated from backend/op_list.h (as supports() and the refusals name them).
enum class Op {
#define MPTRAIN_OP_ENUMERATOR(e, name, A, roles) e,
  MPTRAIN_OPS(MPTRAIN_OP_ENUMERATOR)
#undef MPTRAIN_OP_ENUMERATOR
};
#define MPTRAIN_OP_ONE(e, name, A, roles) +1
inline constexpr int kNumOps = 0 MPTRAIN_OPS(MPTRAIN_OP_ONE);
#undef MPTRAIN_OP_ONE
const char* backend_op_name(Op op);  // "cast", "linear", "linear_activation", ...

// The precision roles whose rules decide an op's dtypes (op_list.h's fourth column).
struct OpRoles : RoleBits {
  static constexpr RoleSet of(Op op) {
    switch (op) {
#define MPTRAIN_OP_ROLE_CASE(e, name, A, roles) \
  case Op::e:                                   \
    return roles;
      MPTRAIN_OPS(MPTRAIN_OP_ROLE_CASE)
#undef MPTRAIN_OP_ROLE_CASE
    }
    return 0;
  }
};
constexpr RoleSet op_roles(Op op) { return OpRoles::of(op); }
// Every op has a rule: its line names at least one role.
constexpr bool every_op_has_a_role() {
  for (int i = 0; i < kNumOps; ++i)
    if (op_roles(static_cast<Op>(i)) == 0) return false;
  return true;
}
static_assert(every_op_has_a_role(), "an op of backend/op_list.h names no precision role");

// How an op touches one of its views: what the op profile counts as bytes and what the CPU's
// widening writes back.
enum class Access : std::uint8_t {
  Read,      // read once
  Write,     // written (=)
  Add,       // read and written: accumulated (+=) or updated in place
  ReadRows,  // a table read only at indexed rows: counted as the rows the op moves
  AddRows,   // a table accumulated only at indexed rows
  Scratch,   // memory the backend lays out itself (working memory, saved state): not typed, not counted
};

// One view of an op's arguments, named as refusals and capability checks name it. `typed` is
// false where the interface fixes the dtype (fp32 statistics and losses): supports() is not
// asked about it (the entry point checks it). `follows` marks a view whose dtype is chosen with
// another's (a bias with its linear's, beta with gamma, dqkv with qkv: the comment at the field
// says whose), and `only` the ops of a shared Args a view belongs to (a bit per Op; 0 = all):
// what an op's own dtypes are, which conformance enumerates (op_dtype_tensors), is the rest.
struct ArgView {
  const char* name;
  View* view;
  Access access;
  bool typed = true;
  bool follows = false;
  std::uint64_t only = 0;
};

// views()' entries: read once, written (=), accumulated or updated in place (+=).
constexpr ArgView reads(const char* name, View& v) { return {name, &v, Access::Read}; }
constexpr ArgView writes(const char* name, View& v) { return {name, &v, Access::Write}; }
constexpr ArgView adds(const char* name, View& v) { return {name, &v, Access::Add}; }
constexpr ArgView reads_rows(const char* name, View& v) { return {name, &v, Access::ReadRows}; }
constexpr ArgView adds_rows(const char* name, View& v) { return {name, &v, Access::AddRows}; }
constexpr ArgView workspace(const char* name, View& v) { return {name, &v, Access::Scratch}; }
constexpr ArgView fixed(
    ArgView v) {  // a dtype the interface fixes (fp32 statistics, int32 indices): not asked
  v.typed = false;
  return v;
}
constexpr ArgView follows(ArgView v) {  // a dtype chosen with another view's (asked, not enumerated)
  v.follows = true;
  return v;
}
constexpr std::uint64_t op_bit(Op op) { return std::uint64_t{1} << static_cast<int>(op); }
static_assert(kNumOps <= 64, "ArgView::only holds one bit an op");
constexpr ArgView only(Op op, ArgView v) {  // a view of one op of a shared Args (pre: the activations')
  v.only |= op_bit(op);
  return v;
}

// An Args struct's views (its views() lists them; readers do not write through them).
template <class A>
auto views_of(const A& a) {
  return const_cast<A&>(a).views();
}

// One capability question: the op, the storage type of each present view by name, and the
// arithmetic of its products. Built from the op's own arguments (op_types), so the question is
// the call's; a policy asks with placeholder views (View::dtype_only).
struct OpTypes {
  Op op = Op::Cast;
  ComputeType math = ComputeType::F32;    // the products' (a GEMM's; an attention's scores)
  ComputeType values = ComputeType::F32;  // an attention's second product (probabilities · values)
  std::array<std::pair<const char*, StorageType>, 8> named{};
  int count = 0;

  OpTypes& set(const char* name, StorageType t);
  bool has(std::string_view name) const;
  // The storage type of `name` (Error when the question has no such tensor).
  StorageType operator[](std::string_view name) const;
  // Every named tensor in one storage type.
  bool uniform() const;
  // "out=bf16 x=bf16 w=bf16 with bf16 products" (no products part for fp32 arithmetic).
  std::string describe() const;
};

// What a linear does after its GEMM, in the one pass over the fp32 accumulator.
enum class Epilogue {
  Bias,          // out = round(x·w + b)
  BiasGelu,      // pre = round(x·w + b); out = round(gelu(pre)), tanh form   (GPT-2's mlp.c_fc)
  BiasGeluErf,   // the same with the exact erf GELU                         (BERT's intermediate, MLM)
  BiasTanh,      // out = round(tanh(round(x·w + b)))                       (BERT's pooler)
  BiasResidual,  // out = residual + round_to(rounding)(x·w + b)               (the blocks' projections)
};
// The epilogues that end in an activation (their backward goes through its derivative).
constexpr bool has_activation(Epilogue e) {
  return e == Epilogue::BiasGelu || e == Epilogue::BiasGeluErf || e == Epilogue::BiasTanh;
}
// The GELUs keep their input (pre) for backward; tanh is differentiated from its output.
constexpr bool keeps_pre(Epilogue e) { return e == Epilogue::BiasGelu || e == Epilogue::BiasGeluErf; }

struct LinearArgs {
  View out{};   // [N, M] (=)
  View x{};     // [N, K]
  View w{};     // [K, M], any strides: Conv1D's [C, OC] as is, nn.Linear's [OC, C] through View::t()
  View bias{};  // [M] (fp32, or the policy's small_weights storage), or empty: follows the plan
  ComputeType math = ComputeType::F32;  // the products' arithmetic; sums are fp32
  // w already holds values of the arithmetic's format (a weight copy refreshed once per step:
  // TF32-rounded, or fp16 values held in fp32), so no backend rounds it again.
  bool w_rounded = false;
  Epilogue epilogue = Epilogue::Bias;
  View pre{};                               // the GELUs: [N, M] (=) their input, kept for backward
  View residual{};                          // BiasResidual: [N, M] the residual stream; may alias out
  StorageType rounding = StorageType::F32;  // BiasResidual: the linear output's dtype, rounded before the add
  // Optional working memory the caller planned (the CPU keeps its fp32 accumulator there);
  // without it, or when it is too small, the backend uses its own.
  View scratch{};

  Op op() const {
    return has_activation(epilogue)             ? Op::LinearActivation
           : epilogue == Epilogue::BiasResidual ? Op::LinearResidual
                                                : Op::Linear;
  }
  auto views() {
    return std::array{writes("out", out),           reads("x", x),      reads("w", w),
                      follows(reads("bias", bias)), only(Op::LinearActivation, writes("pre", pre)),
                      only(Op::LinearResidual, reads("residual", residual)),
                      workspace("scratch", scratch)};
  }
};

struct LinearBackwardArgs {
  View dx{};  // [N, K] (=) dy·w^T, or empty (no input gradient)
  View dw{};  // [K, M] (+=) x^T·dy, strided like w: the fp32 master gradient, or a GPU plan's 16-bit one
  View db{};  // [M] (+=) column sums of dy in dw's dtype, or empty
  View dy{};  // [N, M] the gradient of out
  View x{};   // [N, K] as the forward read it
  View w{};   // [K, M] as the forward read it
  ComputeType math = ComputeType::F32;
  bool w_rounded = false;              // as LinearArgs::w_rounded
  Epilogue epilogue = Epilogue::Bias;  // an activation: dy goes through its derivative first
  View pre{};                          // an activation: [N, M], GELU's input (pre) or tanh's output (out)
  bool dx_accumulate = false;          // dx (+=) instead of (=): several branches add into one gradient
  // Optional working memory the caller planned: where the CPU writes the gradient the GEMMs
  // read (d(pre) through GELU, or dy converted once to their operand format) — [N, M] in the
  // arithmetic's operand storage. Through GELU with an fp32 dy and fp32 operands it may be dy
  // itself (computed in place). Without it the GEMMs convert dy each (same values).
  View scratch{};
  // x came out of an activation (the previous linear's epilogue): dx (=) act'(x_pre)·(dy·w^T), the
  // gradient of that linear's pre, so that its backward reads it as dy with no activation of its
  // own. x_pre [N, K] as that linear's `pre` (GELU's input; tanh's output). A GPU fuses the
  // derivative into the dx product (cuBLASLt's DGELU epilogue: one pass over [N, K] less); the
  // CPU rounds dx, then applies it, the same values as the previous linear's epilogue would.
  Epilogue x_epilogue = Epilogue::Bias;
  View x_pre{};

  Op op() const {
    return has_activation(epilogue) || has_activation(x_epilogue) ? Op::LinearActivationBackward
                                                                   : Op::LinearBackward;
  }
  auto views() {
    return std::array{ArgView{"dx", &dx, dx_accumulate ? Access::Add : Access::Write},
                      adds("dw", dw),
                      follows(adds("db", db)),
                      reads("dy", dy),
                      reads("x", x),
                      reads("w", w),
                      only(Op::LinearActivationBackward, reads("pre", pre)),
                      follows(reads("x_pre", x_pre)),
                      workspace("scratch", scratch)};
  }
};

// rms: RMSNorm (Llama's), out = x·rstd·gamma with rstd = 1/sqrt(mean(x²) + eps): no mean, no
// beta (both views empty), an op of its own on the same entry point.
// The rows a LayerNorm normalises: [N, C] contiguous, or [A, G, C] with strides [S, C, 1] (S ≥
// G·C): G rows of C inside each of A wider rows, N = A·G (QK-norm's heads inside a packed qkv;
// every tensor of one call has x's shape and strides). Row r starts at (r / groups)·stride +
// (r % groups)·C.
struct NormRows {
  std::int64_t rows = 0, C = 0, groups = 1, stride = 0;
  static NormRows of(const View& x) {
    NormRows r;
    r.C = x.rank > 0 ? x.dim(-1) : 0;
    r.groups = x.rank == 3 ? x.dim(1) : 1;
    r.rows = x.rank == 3 ? x.dim(0) * x.dim(1) : x.rank == 2 ? x.dim(0) : 0;
    r.stride = x.rank == 3 ? x.stride[0] : r.C;
    return r;
  }
};

struct LayerNormArgs {
  View out{};            // x's shape and strides (=) in any storage: the next GEMM's input dtype
  View mean{}, rstd{};   // [N] fp32 (=), for backward (rms: rstd only)
  View x{};              // [N, C] (or NormRows' [A, G, C]) the residual stream
  View gamma{}, beta{};  // [C] (rms: gamma only)
  float eps = 1e-5f;
  bool rms = false;

  Op op() const { return rms ? Op::RmsNorm : Op::LayerNorm; }
  auto views() {
    return std::array{writes("out", out), fixed(writes("mean", mean)), fixed(writes("rstd", rstd)),
                      reads("x", x),      reads("gamma", gamma),       follows(reads("beta", beta))};
  }
};

// dx (+=) by default: the residual stream's gradient collects every branch. accumulate = false
// writes dx (=), and dx may then be dout itself (QK-norm's backward in place in dqkv).
struct LayerNormBackwardArgs {
  View dx{};               // x's shape and strides (+=, or = when !accumulate)
  View dgamma{}, dbeta{};  // [C] (+=)
  View dout{};             // x's shape and strides: the gradient of out
  View x{};                // [N, C] (or NormRows' [A, G, C]) the normalised input
  View gamma{};
  View mean{}, rstd{};  // rms: rstd only (and no dbeta)
  bool rms = false;
  bool accumulate = true;

  Op op() const { return rms ? Op::RmsNormBackward : Op::LayerNormBackward; }
  auto views() {
    return std::array{accumulate ? adds("dx", dx) : writes("dx", dx),
                      adds("dgamma", dgamma),
                      follows(adds("dbeta", dbeta)),
                      reads("dout", dout),
                      reads("x", x),
                      reads("gamma", gamma),
                      fixed(reads("mean", mean)),
                      fixed(reads("rstd", rstd))};
  }
};

// The dtypes of an attention (the policy's): qkv (and dqkv), the saved probabilities, out
// (and dout), and the arithmetic of its two products (and of their backward products).
struct AttentionDtypes {
  StorageType qkv = StorageType::F32, probs = StorageType::F32, out = StorageType::F32;
  ComputeType scores = ComputeType::F32, values = ComputeType::F32;
};
// What an attention keeps for backward and the scratch it uses, in bytes: the backend decides
// (the CPU saves the probabilities P; a flash kernel saves only the row statistics).
struct AttentionBytes {
  size_t saved = 0, scratch = 0;
};

// Multi-head self-attention over the heads inside qkv, causal (GPT-2) or bidirectional under a
// key padding mask (BERT): q, k, v = qkv[:, 0:C | C:2C |
// 2C:3C], NH heads each, scale 1/sqrt(C/NH); out has the heads concatenated (before c_proj).
struct AttentionArgs {
  View out{};      // [rows, C] (=), C = NH·HS
  View qkv{};      // [rows, 3C] (q | k | v): rows = B·T, or packed (EmbeddingArgs' comment) under cu_seqlens
  View saved{};    // attention_bytes().saved bytes: written here, read by backward
  View scratch{};  // attention_bytes().scratch bytes, not preserved
  int B = 0, T = 0, NH = 0;
  AttentionDtypes types;
  bool causal = true;
  // Bidirectional only: Hugging Face's attention_mask, int32 [B·T], nonzero = a real key
  // (empty: none is padding). A sequence without a real key is refused.
  View key_mask{};
  // Bidirectional only: the packed layout, int32 [B+1] (each sequence attends to itself; no key
  // mask). Its saved and scratch memory is attention_bytes(⌈rows / T⌉, T, ...): enough for any
  // packing of the rows (Σ L² ≤ T·rows), however many sequences B counts.
  View cu_seqlens{};
  // Grouped-query attention (Llama's): kv_heads key and value heads, a divisor of NH (0 = NH; 1 =
  // multi-query); qkv is then [rows, (NH + 2·kv_heads)·HS] and query head h reads key and value
  // head h / (NH / kv_heads).
  int kv_heads = 0;

  Op op() const { return Op::Attention; }
  // The dtypes are `types` (qkv and out are checked against them; op_types asks probs too).
  auto views() {
    return std::array{reads("qkv", qkv),
                      writes("out", out),
                      workspace("saved", saved),
                      workspace("scratch", scratch),
                      fixed(reads("key_mask", key_mask)),
                      fixed(reads("cu_seqlens", cu_seqlens))};
  }
};

// The batch an attention's saved and scratch memory is sized for (attention_bytes' B): B, or
// for packed sequences ⌈rows / T⌉, which bounds any packing of the rows (Σ L² ≤ T·rows).
int attention_memory_batch(int B, int T, std::int64_t rows, bool packed);

struct AttentionBackwardArgs {
  View dqkv{};  // [rows, 3C] (=), in types.qkv
  View dout{};  // [rows, C], in types.out
  View out{};   // [rows, C] the forward's out as it wrote it (a flash backward reads it), in types.out
  View qkv{};   // as the forward read it
  View saved{}, scratch{};
  int B = 0, T = 0, NH = 0;
  AttentionDtypes types;
  bool causal = true;  // as the forward ran (the saved probabilities carry the mask)
  View cu_seqlens{};   // as the forward ran
  int kv_heads = 0;    // as the forward ran

  Op op() const { return Op::AttentionBackward; }
  auto views() {
    return std::array{reads("qkv", qkv),
                      reads("out", out),
                      follows(writes("dqkv", dqkv)),
                      follows(reads("dout", dout)),
                      workspace("saved", saved),
                      workspace("scratch", scratch),
                      fixed(reads("cu_seqlens", cu_seqlens))};
  }
};

struct CrossEntropyArgs {
  View losses{};   // [N] fp32 (=): -log softmax(logits[n, :vocab])[target]; 0 where target is -1
  View dlogits{};  // [N, Vp] (=) dloss·(softmax - onehot) in any storage, zero on padded columns and
                   // ignored rows; may alias logits (same dtype); empty: the loss only
  View logits{};   // [N, Vp] in any storage (fp32 on the CPU's plan, 16-bit on a GPU's)
  View targets{};  // int32 [N] in [0, vocab) or -1
  View dloss{};    // [N] fp32, the gradient of each loss (required with dlogits)
  int vocab = 0;   // the real columns (Vp - vocab are padding)
  // Sophia's Gauss-Newton-Bartlett labels: with `sampled`, each row's label is drawn from its
  // own softmax inside the pass (a function of (seed, counter, row) only) instead of read from
  // targets, and written to sampled (int32 [N]); losses and dlogits as for those targets.
  View sampled{};
  std::uint64_t seed = 0, counter = 0;

  Op op() const { return sampled.empty() ? Op::CrossEntropy : Op::SampledCrossEntropy; }
  auto views() {
    return std::array{writes("dlogits", dlogits),       reads("logits", logits),
                      fixed(writes("losses", losses)),  fixed(reads("dloss", dloss)),
                      fixed(reads("targets", targets)), fixed(writes("sampled", sampled))};
  }
};

// The packed (unpadded) layout of BERT's batches, for the embeddings and the attention: with
// cu_seqlens [B+1] (the backend's memory, cu_seqlens[0] = 0, increasing), sequence b is rows
// [cu_seqlens[b], cu_seqlens[b+1]) of every [rows, ·] tensor, at most T long, its positions
// 0, 1, ... from its first row, and it attends only to itself; the tensors hold cu_seqlens[B]
// rows (at most B·T). Empty: B sequences of exactly T rows each (row b·T + t).
struct EmbeddingArgs {
  View out{};     // [rows, C] (=) word[tokens] + pos[t] (+ type[types])
  View tokens{};  // int32 [rows], ids checked by the data layer
  int B = 0, T = 0;
  View cu_seqlens{};  // int32 [B+1]: the packed layout (above); empty: rows = B·T
  View word{};        // [V, C]
  View pos{};         // [P >= T, C], or empty: no position term (Llama's); word's storage
  View types{};       // BERT's segment ids, int32 [rows], or empty
  View type_table{};  // [2, C] with types; word's storage

  Op op() const { return Op::Embedding; }
  auto views() {
    return std::array{writes("out", out),
                      reads_rows("word", word),
                      follows(reads_rows("pos", pos)),
                      follows(reads_rows("type_table", type_table)),
                      fixed(reads("tokens", tokens)),
                      fixed(reads("types", types)),
                      fixed(reads("cu_seqlens", cu_seqlens))};
  }
};

struct EmbeddingBackwardArgs {
  View dword{}, dpos{}, dtype{};  // (+=), like the tables; dpos, dtype (dword's storage) empty without them
  View dout{};                    // [rows, C]
  View tokens{}, types{};         // as the forward's
  int B = 0, T = 0;
  View cu_seqlens{};   // as the forward's
  int pad_token = -1;  // a word row that takes no gradient (nn.Embedding's padding_idx); -1: none

  Op op() const { return Op::EmbeddingBackward; }
  auto views() {
    return std::array{adds_rows("dword", dword),
                      follows(adds_rows("dpos", dpos)),
                      follows(adds_rows("dtype", dtype)),
                      reads("dout", dout),
                      fixed(reads("tokens", tokens)),
                      fixed(reads("types", types)),
                      fixed(reads("cu_seqlens", cu_seqlens))};
  }
};

// The optimizer's update of a flat range of parameters (every tensor of a table in one launch,
// or a piece of one): params, grads and the state are fp32, contiguous and of one size; the update
// reads the gradients as grads·grad_scale (the clip factor: clipping takes no pass of its own).
// decay_mask (int32 words, at least ⌈n / 32⌉; empty: every element decays) has bit i % 32 of
// word i / 32 set where element i decays by weight_decay: the tensors' decay rules in one launch.
struct AdamWArgs {
  View params{}, grads{}, m{}, v{};
  float lr = 0.0f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.0f;
  std::int64_t t = 1;  // the 1-based optimizer step (bias correction)
  float grad_scale = 1.0f;
  View decay_mask{};
  // Optional: the updated params also written here as the operand of GEMMs in arithmetic `math`
  // (the bits to_operand(copy, params, math) gives): a weight copy refreshed by the update's own
  // pass (model/weight_copies.h). Backends that cannot say so in can_run.
  View copy{};
  ComputeType math = ComputeType::F32;

  Op op() const { return Op::AdamW; }
  auto views() {
    return std::array{adds("params", params), reads("grads", grads), adds("m", m), adds("v", v),
                      fixed(reads("decay_mask", decay_mask)), writes("copy", copy)};
  }
};

// The decay mask of n elements where the [begin, end) ranges decay (Error for a range past n):
// built once on the host, then uploaded into the backend's memory.
std::vector<std::uint32_t> decay_mask_bits(size_t n, const std::vector<std::pair<size_t, size_t>>& decayed);

struct SophiaArgs {
  View params{}, grads{}, m{}, h{};
  float lr = 0.0f, beta1 = 0.965f;
  float rho_b = 0.0f;  // ρ·b (b: tokens per optimizer step)
  float weight_decay = 0.0f, grad_scale = 1.0f;
  View decay_mask{};  // as AdamWArgs'

  Op op() const { return Op::Sophia; }
  auto views() {
    return std::array{adds("params", params), reads("grads", grads), adds("m", m), reads("h", h),
                      fixed(reads("decay_mask", decay_mask))};
  }
};

// A plain matrix product with BLAS's scalars (Muon's Newton–Schulz steps, optim/muon.cpp):
//   c[M,N] (=) alpha·a[M,K]·b[K,N] + beta·c, sums in fp32, c rounded once.
// a and b: one storage type, each contiguous or the transpose (View::t()) of a contiguous
// matrix; c contiguous, in their type or fp32. beta == 0 ignores what c held.
struct MatmulArgs {
  View c{}, a{}, b{};
  float alpha = 1.0f, beta = 0.0f;
  ComputeType math = ComputeType::F32;  // the products' arithmetic

  Op op() const { return Op::Matmul; }
  auto views() {
    return std::array{ArgView{"c", &c, beta != 0.0f ? Access::Add : Access::Write}, reads("a", a),
                      reads("b", b)};
  }
};

// Muon's momentum over one matrix (or one of q, k, v inside a fused weight): m and grads are
// [R, W] fp32 views whose rows may be strided (a column block of a wider matrix; columns
// contiguous), u a contiguous fp32 [R, W]:
//   m (=) mu·m + g;  u (=) nesterov ? g + mu·m : m;  g = grads·grad_scale
struct MuonMomentumArgs {
  View m{}, grads{}, u{};
  float mu = 0.95f, grad_scale = 1.0f;
  bool nesterov = true;

  Op op() const { return Op::MuonMomentum; }
  auto views() { return std::array{adds("m", m), reads("grads", grads), writes("u", u)}; }
};
// Muon's update of one matrix: params [R, W] fp32 (rows may be strided, as above), o the
// orthogonalised update [R, W] contiguous in any storage:
//   p (=) p·(1 − lr·weight_decay) − lr·scale·o
struct MuonUpdateArgs {
  View params{}, o{};
  float lr = 0.0f, weight_decay = 0.0f, scale = 1.0f;

  Op op() const { return Op::MuonUpdate; }
  auto views() { return std::array{adds("params", params), reads("o", o)}; }
};

// The elementwise ops and the rows ops, each the arguments of its entry point (Backend::cast, ...).
struct CastArgs {
  View dst{}, src{};
  Op op() const { return Op::Cast; }
  auto views() { return std::array{writes("dst", dst), reads("src", src)}; }
};
struct AccumulateArgs {
  View dst{}, src{};
  Op op() const { return Op::Accumulate; }
  auto views() { return std::array{adds("dst", dst), reads("src", src)}; }
};
struct ToOperandArgs {
  View dst{}, src{};
  ComputeType math = ComputeType::F32;
  Op op() const { return Op::ToOperand; }
  auto views() { return std::array{writes("dst", dst), reads("src", src)}; }
};
struct GatherRowsArgs {
  View dst{}, src{}, rows{};  // rows: int32 [count]
  Op op() const { return Op::GatherRows; }
  auto views() { return std::array{writes("dst", dst), reads_rows("src", src), fixed(reads("rows", rows))}; }
};
struct ScatterAddRowsArgs {
  View dst{}, src{}, rows{};
  Op op() const { return Op::ScatterAddRows; }
  auto views() { return std::array{adds_rows("dst", dst), reads("src", src), fixed(reads("rows", rows))}; }
};
struct ArgmaxRowsArgs {
  View best{};  // int32 [count]
  View x{};
  int n = 0;
  static constexpr bool kToHost = true;  // run at once, never captured (BERT's accuracy reads it)
  Op op() const { return Op::ArgmaxRows; }
  auto views() { return std::array{fixed(writes("best", best)), reads("x", x)}; }
};

// The optimizer's elementwise kernels over one flat fp32 range (Backend::sophia_hessian, ...).
// The three that answer a number (Result) bring it to the host.
struct SophiaHessianArgs {
  View h{}, ghat{};
  float beta2 = 0.99f;
  Op op() const { return Op::SophiaHessian; }
  auto views() { return std::array{adds("h", h), reads("ghat", ghat)}; }
};
struct CountUnclippedArgs {
  View m{}, h{};
  float rho_b = 0.0f;
  using Result = std::int64_t;
  static constexpr bool kToHost = true;
  Op op() const { return Op::CountUnclipped; }
  auto views() { return std::array{reads("m", m), reads("h", h)}; }
};
struct UnscaleCheckArgs {
  View grads{};
  float inv_scale = 1.0f;
  using Result = bool;
  static constexpr bool kToHost = true;
  Op op() const { return Op::UnscaleCheck; }
  auto views() { return std::array{adds("grads", grads)}; }
};
struct SumSquaresArgs {
  View x{};
  using Result = double;
  static constexpr bool kToHost = true;
  Op op() const { return Op::SumSquares; }
  auto views() { return std::array{reads("x", x)}; }
};
struct ScaleArgs {
  View x{};
  float factor = 1.0f;
  Op op() const { return Op::Scale; }
  auto views() { return std::array{adds("x", x)}; }
};

// Rotary position embeddings (Llama's; Hugging Face's rotate-half convention), in place on the
// first `heads` heads of every row of x: row r is position t = r mod T; in a head of head_size
// channels, channel i and i + head_size/2 (i < head_size/2) turn by the angle t·theta^(−2i/head_size)
// (fp32, as transformers computes it): (a, b) ← (a·cos − b·sin, b·cos + a·sin). inverse: the
// transposed turn, which is the backward (applied to the gradient in place).
struct RopeArgs {
  View x{};  // [rows, W] (updated in place), rows a multiple of T, W >= heads·head_size
  int T = 0, heads = 0, head_size = 0;
  float theta = 10000.0f;
  bool inverse = false;
  Op op() const { return Op::Rope; }
  auto views() { return std::array{adds("x", x)}; }
};

// Llama's MLP activation: out = silu(gate)·up over [N, I], from gate_up [N, 2I] = (gate | up) per
// row (the gate and up projections as one linear's output).
struct SwigluArgs {
  View out{};      // [N, I] (=)
  View gate_up{};  // [N, 2I]
  Op op() const { return Op::Swiglu; }
  auto views() { return std::array{writes("out", out), reads("gate_up", gate_up)}; }
};
// dgate_up (=) = (dout·up·silu'(gate) | dout·silu(gate)); must not alias gate_up.
struct SwigluBackwardArgs {
  View dgate_up{};  // [N, 2I] (=)
  View dout{};      // [N, I]
  View gate_up{};   // [N, 2I] the forward's input
  Op op() const { return Op::SwigluBackward; }
  auto views() { return std::array{writes("dgate_up", dgate_up), reads("dout", dout), reads("gate_up", gate_up)}; }
};

// ReLU² (modded-nanogpt's un-gated MLP activation): out (=) = relu(x)², elementwise over [N, I].
struct Relu2Args {
  View out{};  // [N, I] (=)
  View x{};    // [N, I] the up projection
  Op op() const { return Op::Relu2; }
  auto views() { return std::array{writes("out", out), reads("x", x)}; }
};
// dx (=) = dout·2·relu(x); dx may be dout itself.
struct Relu2BackwardArgs {
  View dx{};    // [N, I] (=)
  View dout{};  // [N, I]
  View x{};     // [N, I] the forward's input
  Op op() const { return Op::Relu2Backward; }
  auto views() { return std::array{writes("dx", dx), reads("dout", dout), reads("x", x)}; }
};

// GELU on its own, elementwise over [N, I]: out (=) = gelu(x), the tanh form (GPT-2's) or, with
// erf, the exact one (BERT's). The same values as a linear's GELU epilogue writes from its `pre`
// (what --recompute gelu relies on: the backward refills the epilogue's output from its saved input).
struct GeluArgs {
  View out{};  // [N, I] (=)
  View x{};    // [N, I] the activation's input (a linear's output)
  bool erf = false;
  Op op() const { return Op::Gelu; }
  auto views() { return std::array{writes("out", out), reads("x", x)}; }
};

// FP8's emulated cast (issue 57): out (=) the values of x·scale rounded to the format (core/fp8.h:
// nearest even, saturating at the format's largest by default), held in out's storage (fp32 on the
// CPU: every FP8 value is one). A product of two such operands divided by both scales is an FP8
// GEMM's. out may alias x.
struct Fp8CastArgs {
  View out{};
  View x{};
  float scale = 1.0f;
  Fp8Format format = Fp8Format::E4M3;
  bool saturate = true;
  Op op() const { return Op::Fp8Cast; }
  auto views() { return std::array{writes("out", out), reads("x", x)}; }
};
// The largest |x[i]| of an fp32 tensor (NaN when one is NaN), for FP8's scale.
struct AmaxArgs {
  View x{};
  using Result = double;
  static constexpr bool kToHost = true;
  Op op() const { return Op::Amax; }
  auto views() { return std::array{reads("x", x)}; }
};

// What an op's run() answers: void, or its Result (a number the host needs).
template <class A>
struct OpResult {
  using type = void;
};
template <class A>
requires requires { typename A::Result; }
struct OpResult<A> {
  using type = typename A::Result;
};
template <class A>
using op_result_t = typename OpResult<A>::type;

// The capability question of one call: its present typed views by name, its arithmetic (an
// attention's from its dtypes, with the saved probabilities' storage).
template <class A>
OpTypes op_types(const A& a) {
  OpTypes t;
  t.op = a.op();
  for (const ArgView& v : views_of(a))
    if (v.typed && v.access != Access::Scratch && !v.view->empty()) t.set(v.name, v.view->type);
  if constexpr (requires { a.math; }) t.math = a.math;
  if constexpr (requires { a.types.probs; }) {
    t.set("probs", a.types.probs);
    t.math = a.types.scores;
    t.values = a.types.values;
  }
  return t;
}

// f(A{}) for a default Args of the struct op's entry point takes (op_list.h's third column), e.g.
// to read its views().
template <class F>
decltype(auto) with_op_args(Op op, F&& f) {
  switch (op) {
#define MPTRAIN_OP_ARGS_CASE(e, name, A, roles) \
  case Op::e:                                   \
    return f(A{});
    MPTRAIN_OPS(MPTRAIN_OP_ARGS_CASE)
#undef MPTRAIN_OP_ARGS_CASE
  }
  return f(CastArgs{});  // unreachable: every Op is a case
}

// The tensors whose storage types are an op's own choice, in views() order: its typed views less
// the ones that follow another's dtype and those of a shared Args' other ops, then an attention's
// probabilities (a dtype of `types`, not a view). What conformance enumerates dtype tuples over.
std::vector<const char*> op_dtype_tensors(Op op);

// Work captured once and replayed as a unit (backend.h, "Graphs"): a CUDA graph on a GPU, the
// recorded calls on a backend without a native capture.
class Graph {
 public:
  virtual ~Graph() = default;
  // Runs the captured work again, on the same memory with the arguments it was captured with.
  virtual void replay() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;  // "cpu", "cuda"
  // What make_policy needs to know of this backend.
  virtual BackendCaps caps() const = 0;
  // Whether the backend has a kernel for this call: asked with the op's own arguments (or a
  // policy's placeholders of them, View::dtype_only), as every entry point asks before it runs.
  template <class A>
  bool supports(const A& a) const {
    return can_run(op_types(a));
  }
  bool supports(const OpTypes& t) const { return can_run(t); }
  // The storage a GEMM of arithmetic `math` reads its operands in (fp16 without fp16 GEMMs:
  // fp16 values held in fp32; TF32: rounded fp32): precision/caps.h's rule for caps().
  StorageType operand_storage(ComputeType math) const { return mptrain::operand_storage(math, caps()); }
  // The memory an attention of this shape and these dtypes needs (the activation plan asks).
  virtual AttentionBytes attention_bytes(int B, int T, int C, int NH, const AttentionDtypes& types) const = 0;
  // Whether a linear keeps its fp32 accumulator in the working memory the caller plans
  // (LinearArgs::scratch): the CPU's GEMMs sum into memory before the epilogue rounds; a GPU's
  // epilogue rounds in registers, and the plan then holds no such buffer.
  virtual bool linear_uses_scratch() const { return true; }

  // The memory every tensor an op reads or writes lives in (the model's parameters, gradients,
  // activations and staged ids, the optimizer's state): the host's on the CPU, the device's on a
  // GPU. Host code crosses into it only through upload/download (core/buffer.h), so the model
  // enqueues work between explicit staging and download points.
  virtual MemoryResource& memory() = 0;
  // A contiguous view from the host, and back (the download waits for the work writing src).
  void upload(const View& dst, const void* host);
  void download(void* host, const View& src);

  // dst (=) src converted (exact widening, or one round to nearest even); same element count,
  // both contiguous.
  void cast(const View& dst, const View& src);
  // v (=) 0, contiguous.
  void zero(const View& v);
  // dst (+=) src widened, elementwise, both contiguous, dst fp32: a GPU plan's 16-bit weight
  // gradients of one micro-batch into the fp32 master gradients.
  void accumulate(const View& dst, const View& src);
  // dst (=) src in the format a GEMM of `math` multiplies (exact widening, TF32 rounding, or one
  // round to nearest even), dst in operand_storage(math): the weight copies' refresh.
  void to_operand(const View& dst, const View& src, ComputeType math);
  void linear(const LinearArgs& a);
  void linear_backward(const LinearBackwardArgs& a);
  void layernorm(const LayerNormArgs& a);
  void layernorm_backward(const LayerNormBackwardArgs& a);
  void attention(const AttentionArgs& a);
  void attention_backward(const AttentionBackwardArgs& a);
  void cross_entropy(const CrossEntropyArgs& a);
  void embedding(const EmbeddingArgs& a);
  void embedding_backward(const EmbeddingBackwardArgs& a);
  // Rows by index (BERT's [CLS] rows and masked positions), count = the int32 views' length:
  //   gather_rows       dst[r] (=) src[rows[r]] in dst's dtype for r < count, the rest of dst 0
  //   scatter_add_rows  dst[rows[r]] (+=) src[r] for r < count (distinct rows)
  //   argmax_rows       best[r] (=) the index of the largest of x[r, :n], the first on ties
  void gather_rows(const View& dst, const View& src, const View& rows);
  void scatter_add_rows(const View& dst, const View& src, const View& rows);
  void argmax_rows(const View& best, const View& x, int n);

  // The optimizer's kernels (optim/ writes the step once over them: train/step.cpp). Every
  // tensor fp32 and contiguous. The three that answer a number bring it to the host, a sync on
  // a GPU: the step needs each of them there anyway (the skip, the guard, the win rate).
  //   adamw / sophia    the update of one tensor (AdamWArgs, SophiaArgs)
  //   sophia_hessian    h (=) β2·h + (1−β2)·ghat², elementwise
  //   count_unclipped   how many coordinates have |m| < rho_b·h
  //   unscale_and_check grads (=) grads·inv_scale; whether any was inf or NaN (GradScaler)
  //   sum_squares       sum x² in double, in an order that does not depend on the thread count
  //   scale             x (=) x·factor
  //   matmul, muon_momentum, muon_update   Muon's (MatmulArgs, MuonMomentumArgs, MuonUpdateArgs)
  void adamw(const AdamWArgs& a);
  void sophia(const SophiaArgs& a);
  void sophia_hessian(const View& h, const View& ghat, float beta2);
  std::int64_t count_unclipped(const View& m, const View& h, float rho_b);
  bool unscale_and_check(const View& grads, float inv_scale);
  double sum_squares(const View& x);
  void scale(const View& x, float factor);
  void rope(const RopeArgs& a);
  void swiglu(const SwigluArgs& a);
  void swiglu_backward(const SwigluBackwardArgs& a);
  void relu2(const Relu2Args& a);
  void relu2_backward(const Relu2BackwardArgs& a);
  void gelu(const GeluArgs& a);
  void fp8_cast(const Fp8CastArgs& a);
  double amax(const View& x);
  void matmul(const MatmulArgs& a);
  void muon_momentum(const MuonMomentumArgs& a);
  void muon_update(const MuonUpdateArgs& a);

  // Graphs (CUDA graphs' capture and replay). Between begin_capture() and end_capture() the ops
  // are not run but captured — their pointers and arguments as given — and the Graph replays
  // them all at once. What reads or writes host memory (upload, download, the ops that answer a
  // number, argmax_rows) is refused while capturing with an Error naming it: host values are
  // staged before a replay and read after it. Everything a graph touches must stay allocated and
  // keep its address while the graph lives; the first run of a shape should be eager (it sizes
  // the backend's own scratch, which must not move under a graph).
  void begin_capture();
  std::unique_ptr<Graph> end_capture();
  bool capturing() const { return capturing_; }

  // Times every op run from now on into `profile` (backend/op_profile.h; null: stop). A backend
  // whose ops run asynchronously (a GPU's) is waited for before and after each profiled op, so
  // each row is the op's own device time plus its launch: the profiled step is slower than an
  // unprofiled one (no overlap of launches with work), but it says where the device's time goes.
  void set_profile(OpProfile* profile);

 protected:
  // A backend with a native capture (CUDA's stream capture) overrides both; the default records
  // each op's call, which replay() makes again (the CPU: no faster, but the same contract).
  virtual void run_begin_capture();
  virtual std::unique_ptr<Graph> run_end_capture();
  // Returns once every op enqueued so far has finished (the op profile's fence). The CPU's ops
  // have finished when their call returns: nothing to wait for.
  virtual void run_wait() {}
  // The capability check: whether this backend has a kernel for the question (the dtypes of
  // every present view, by name).
  virtual bool can_run(const OpTypes& t) const = 0;
  virtual void run_zero(const View& v) = 0;
  // One run() per Args struct of backend/op_list.h: the op, its arguments checked.
#define MPTRAIN_RUN_HOOK(A) virtual op_result_t<A> run(const A& a) = 0;
  MPTRAIN_OP_ARGS(MPTRAIN_RUN_HOOK)
#undef MPTRAIN_RUN_HOOK

 private:
  // Throws Error "[backend <name>] <op>: no kernel for <tensor>=<dtype> ...[ with <math> products]"
  // unless supports(t).
  void require(const OpTypes& t) const;
  // An op's checked call: asks supports() with its arguments, then runs it now (timed into the
  // profile) or keeps it for the graph being recorded; an op that answers the host runs now.
  template <class A>
  op_result_t<A> submit(const A& a);
  // Runs an op's call now (timed into the profile, with the OpWork that work() describes), or
  // keeps it for the graph being recorded (the default capture).
  template <class F, class W>
  void enqueue(F&& call, W&& work) {
    if (recorded_)
      recorded_->push_back(std::forward<F>(call));
    else if (profile_)
      profiled(call, work);
    else
      call();
  }
  // An op that answers the host at once (never captured): run now, timed into the profile.
  template <class F, class W>
  decltype(auto) answer(F&& call, W&& work) {
    if (profile_) return profiled(call, work);
    return call();
  }
  // Runs call() timed into the profile, from the moment the device is idle until it is again.
  template <class F, class W>
  decltype(auto) profiled(F& call, W& work) {
    run_wait();
    return profile_->time(work(), [&]() -> decltype(auto) {
      struct Wait {  // also when call() throws, as the profile's own timer
        Backend* b;
        ~Wait() { b->run_wait(); }
      } wait{this};
      return call();
    });
  }
  // Error "[backend <name>] <what> while capturing a graph: ..." when capturing.
  void no_host_transfer(const char* what) const;
  bool capturing_ = false;
  std::unique_ptr<std::vector<std::function<void()>>> recorded_;  // the default capture's calls
  OpProfile* profile_ = nullptr;
};

}  // namespace mptrain
