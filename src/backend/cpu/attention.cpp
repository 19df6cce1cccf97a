// Self-attention on oneDNN batched matmuls over (b, h) (gemm_mixed) that read q, k, v straight
// out of qkv[B,T,3C] and write out[B,T,C] / dqkv[B,T,3C] through strides (no permute copies),
// causal (GPT-2) or bidirectional under a key padding mask (BERT), every tensor in the dtype
// AttentionTypes gives it (fp32 included: one implementation for every precision). Per (b, h),
// with S = Q·K^T·scale and P = softmax(S):
//   forward:  Y = P·V
//   backward: dP = dY·V^T;  dS = scale·P ⊙ (dP - rowsum(P ⊙ dP));  dQ = dS·K;  dK = dS^T·Q;
//             dV = P^T·dY
// The causal form works in row blocks of kRowBlock queries that skip the masked half (block
// [r0, r1) needs keys [0, r1): about 53% of the T×T work at T = 1024); the bidirectional form is
// the same loops with a single block of T rows over all T keys, and its softmax gives padded keys
// probability exactly 0 (PyTorch adds finfo.min, whose exp underflows to 0 too), so they get no
// gradient. Scores, dP and the softmax arithmetic are fp32; P and dS are rounded once, when
// written for the products that read them — computed in place when they are kept in fp32.
#include "backend/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/lowp.h"
#include "backend/cpu/vec_math.h"
#include "backend/ops/gemm.h"
#include "core/error.h"

namespace mptrain::cpu {

namespace {

// Query rows per block: large enough for efficient GEMM tiles, small enough that the triangle
// skipped is most of the upper half. 64 over 128 on a 2-core AVX2 EPYC: GPT-2 124M's attention
// 246 → 212 ms per step at T = 256 and 842 → 773 at T = 1024 (docs/benchmarks/2026-11-27.md, issue 23);
// 256 was slower.
constexpr int kRowBlock = 64;
// Softmax rows per OpenMP chunk: rows of one head grow in length with t, so small interleaved
// chunks keep the threads balanced.
constexpr int kRowsPerTask = 16;

inline void check_attention_sizes(const char* op, int B, int T, int C, int NH) {
  MPT_CHECK(B > 0 && T > 0 && C > 0 && NH > 0 && C % NH == 0,
            std::string("[") + op + "] bad size B=" + std::to_string(B) + " T=" + std::to_string(T) +
                " C=" + std::to_string(C) + " NH=" + std::to_string(NH) + " (C must be a multiple of NH)");
}

// The heads' shape: NH query heads of HS in out [.., C], and KV key/value heads (grouped-query
// attention: query head h = j·G + g reads key/value head j, G = NH / KV) in qkv rows of
// W = (NH + 2·KV)·HS, q then k then v.
struct Heads {
  int NH, KV, HS;
  int G() const { return NH / KV; }
  std::int64_t C() const { return static_cast<std::int64_t>(NH) * HS; }
  std::int64_t W() const { return static_cast<std::int64_t>(NH + 2 * KV) * HS; }
  size_t k_at() const { return static_cast<size_t>(C()); }  // k's offset in a row
  size_t v_at() const { return static_cast<size_t>(C() + static_cast<std::int64_t>(KV) * HS); }  // v's
};

// Strides, in elements, of the per-(b, j) views: every product is batched over (B, KV), once per
// member g of a group (offsets g·HS in q, out and dout, g·T·T in the scores); G = 1 is plain
// multi-head attention over (B, NH).
struct AttentionViews {
  GemmLayout rows_q;   // a query head inside qkv (or dqkv): [T, HS], row stride W
  GemmLayout rows_kv;  // a key or value head inside qkv: [T, HS], row stride W
  GemmLayout cols_kv;  // the same head transposed: [HS, T]
  GemmLayout rows_bt;  // a head of out / dout: [T, HS], row stride C
  GemmLayout rows_tt;  // att / dS: [T, T] per (b, h)
  GemmLayout cols_tt;  // att / dS transposed
  AttentionViews(const Heads& hd, int T) {
    const std::int64_t HS = hd.HS, t = T, c = hd.C(), w = hd.W(), G = hd.G(), NH = hd.NH;
    rows_q = {t * w, G * HS, w, 1};
    rows_kv = {t * w, HS, w, 1};
    cols_kv = {t * w, HS, 1, w};
    rows_bt = {t * c, G * HS, c, 1};
    rows_tt = {NH * t * t, G * t * t, t, 1};
    cols_tt = {NH * t * t, G * t * t, 1, t};
  }
};

// Row t of a causal softmax of scale·p[0, T), in place: keys 0..t, zeros above the diagonal.
inline void causal_softmax_row(float* p, int t, int T, float scale) {
  float m = p[0];
#pragma omp simd reduction(max : m)
  for (int j = 1; j <= t; ++j) m = p[j] > m ? p[j] : m;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j <= t; ++j) {
    float e = vexp((p[j] - m) * scale);
    p[j] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
  for (int j = 0; j <= t; ++j) p[j] *= inv;
  for (int j = t + 1; j < T; ++j) p[j] = 0.0f;
}

// A softmax of scale·p[0, T) over the real keys (key_mask[j] != 0; null = all real), in place:
// padded keys get probability exactly 0.
inline void masked_softmax_row(float* p, const int* key_mask, int T, float scale) {
  float mx = -INFINITY;
  for (int j = 0; j < T; ++j)
    if (!key_mask || key_mask[j]) mx = p[j] > mx ? p[j] : mx;
  float sum = 0.0f;
  for (int j = 0; j < T; ++j) {
    const float e = (!key_mask || key_mask[j]) ? vexp((p[j] - mx) * scale) : 0.0f;
    p[j] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int j = 0; j < T; ++j) p[j] *= inv;
}

inline int block_end(int t, int T) { return std::min(T, (t / kRowBlock + 1) * kRowBlock); }

// Element `i` of a buffer of dtype t.
template <class P>
P* at(P* base, size_t i, StorageType t) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<Byte*>(base) + i * storage_bytes(t);
}

size_t tt(int B, int T, int NH) { return static_cast<size_t>(B) * NH * T * T; }

}  // namespace

size_t attention_saved_bytes_typed(int B, int T, int /*C*/, int NH, const AttentionTypes& types) {
  return tt(B, T, NH) * storage_bytes(types.probs);
}

// fp32 scores (forward, unless P is fp32 and they are computed in `saved`) or dP (backward),
// and dS unless it is fp32 and computed in place in dP.
size_t attention_scratch_bytes_typed(int B, int T, int /*C*/, int NH, const AttentionTypes& types) {
  return tt(B, T, NH) * (sizeof(float) + (types.ds == StorageType::F32 ? 0 : storage_bytes(types.ds)));
}

namespace {

// The attention pattern: causal, or every query over the real keys of its sequence.
struct Mask {
  bool causal;
  const int* keys;  // [B,T] nonzero = real key (null: all real); bidirectional form only
  int rows_per_block(int T) const { return causal ? kRowBlock : T; }
  int key_end(int r1, int T) const { return causal ? r1 : T; }              // keys block rows read
  int query_begin(int r0) const { return causal ? r0 : 0; }                 // queries that read block keys
  int row_len(int t, int T) const { return causal ? t + 1 : T; }            // keys row t attends to
  int row_end(int t, int T) const { return causal ? block_end(t, T) : T; }  // what products read
};

void forward_impl(void* out, void* saved, const void* qkv, void* scratch, const AttentionTypes& ty,
                  const Mask& mask, int B, int T, const Heads& hd, GemmWorkspace& ws, Context& ctx) {
  const int HS = hd.HS, NH = hd.NH, KV = hd.KV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const size_t W = static_cast<size_t>(hd.W()), Cs = static_cast<size_t>(hd.C()),
               TT = static_cast<size_t>(T) * T;
  const AttentionViews v(hd, T);
  const bool in_place = ty.probs == StorageType::F32;  // the softmax writes P where it is kept
  float* scores = static_cast<float*>(in_place ? saved : scratch);

  const int RB = mask.rows_per_block(T);
  for (int r0 = 0; r0 < T; r0 += RB) {
    const int r1 = std::min(T, r0 + RB), k1 = mask.key_end(r1, T);
    for (int g = 0; g < hd.G(); ++g)
      gemm_mixed(scores + g * TT + static_cast<size_t>(r0) * T, StorageType::F32, v.rows_tt,
                 {at(qkv, r0 * W + g * HS, ty.qkv), ty.qkv, v.rows_q},
                 {at(qkv, hd.k_at(), ty.qkv), ty.qkv, v.cols_kv}, ty.scores, B, KV, r1 - r0, k1, HS, false,
                 ws, ctx);
  }

  // Softmax of scale·scores in fp32, in place, then P rounded once into `saved`.
  const long long rows = static_cast<long long>(B) * NH * T;
#pragma omp parallel for schedule(static, kRowsPerTask)
  for (long long r = 0; r < rows; ++r) {
    const int t = static_cast<int>(r % T);
    float* p = scores + static_cast<size_t>(r) * T;
    if (mask.causal) {
      causal_softmax_row(p, t, T, scale);
    } else {
      const int b = static_cast<int>(r / (static_cast<long long>(NH) * T));
      masked_softmax_row(p, mask.keys ? mask.keys + static_cast<size_t>(b) * T : nullptr, T, scale);
    }
    if (!in_place)
      dispatch_storage(ty.probs, [&](auto tag) {
        narrow_span(reinterpret_cast<decltype(tag)*>(at(saved, static_cast<size_t>(r) * T, ty.probs)), p, T);
      });
  }

  for (int r0 = 0; r0 < T; r0 += RB) {
    const int r1 = std::min(T, r0 + RB), k1 = mask.key_end(r1, T);
    for (int g = 0; g < hd.G(); ++g)
      gemm_mixed(at(out, r0 * Cs + g * HS, ty.out), ty.out, v.rows_bt,
                 {at(static_cast<const void*>(saved), g * TT + static_cast<size_t>(r0) * T, ty.probs),
                  ty.probs, v.rows_tt},
                 {at(qkv, hd.v_at(), ty.qkv), ty.qkv, v.rows_kv}, ty.values, B, KV, r1 - r0, HS, k1, false,
                 ws, ctx);
  }
}

void backward_impl(void* dqkv, const void* dout, const void* qkv, const void* saved, void* scratch,
                   const AttentionTypes& ty, const Mask& mask, int B, int T, const Heads& hd,
                   GemmWorkspace& ws, Context& ctx) {
  const int HS = hd.HS, NH = hd.NH, KV = hd.KV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const size_t W = static_cast<size_t>(hd.W()), Cs = static_cast<size_t>(hd.C()),
               TT = static_cast<size_t>(T) * T;
  const AttentionViews v(hd, T);
  float* dp = static_cast<float*>(scratch);
  void* ds = ty.ds == StorageType::F32 ? static_cast<void*>(dp) : dp + tt(B, T, NH);  // in place when fp32

  // dP = dY·V^T (fp32), block rows [r0, r1), columns [0, key_end).
  const int RB = mask.rows_per_block(T);
  for (int r0 = 0; r0 < T; r0 += RB) {
    const int r1 = std::min(T, r0 + RB), k1 = mask.key_end(r1, T);
    for (int g = 0; g < hd.G(); ++g)
      gemm_mixed(dp + g * TT + static_cast<size_t>(r0) * T, StorageType::F32, v.rows_tt,
                 {at(dout, r0 * Cs + g * HS, ty.out), ty.out, v.rows_bt},
                 {at(qkv, hd.v_at(), ty.qkv), ty.qkv, v.cols_kv}, ty.values, B, KV, r1 - r0, k1, HS, false,
                 ws, ctx);
  }

  // dS = scale·P ⊙ (dP - rowsum(P ⊙ dP)) in fp32 over the keys the row attends to (0 on padded
  // keys, where P is 0), zero above the diagonal up to the block end (causal), rounded once
  // into ds.
  const long long rows = static_cast<long long>(B) * NH * T;
#pragma omp parallel for schedule(static, kRowsPerTask)
  for (long long r = 0; r < rows; ++r) {
    const int t = static_cast<int>(r % T);
    const int n = mask.row_len(t, T), end = mask.row_end(t, T);
    float* d = dp + static_cast<size_t>(r) * T;
    // P's row in fp32: read in place when it is kept in fp32 (one pass over the row), else
    // widened chunk by chunk.
    const bool wide = ty.probs == StorageType::F32;
    const int step = wide ? std::max(n, 1) : static_cast<int>(kChunk);
    float chunk[kChunk];
    const auto probs = [&](int j0, int len) -> const float* {
      const void* row = at(saved, static_cast<size_t>(r) * T + j0, ty.probs);
      if (wide) return static_cast<const float*>(row);
      dispatch_storage(
          ty.probs, [&](auto tag) { widen_span(chunk, reinterpret_cast<const decltype(tag)*>(row), len); });
      return chunk;
    };
    float dot = 0.0f;
    for (int j0 = 0; j0 < n; j0 += step) {
      const int len = std::min(step, n - j0);
      const float* p = probs(j0, len);
#pragma omp simd reduction(+ : dot)
      for (int j = 0; j < len; ++j) dot += p[j] * d[j0 + j];
    }
    for (int j0 = 0; j0 < n; j0 += step) {
      const int len = std::min(step, n - j0);
      const float* p = probs(j0, len);
#pragma omp simd
      for (int j = 0; j < len; ++j) d[j0 + j] = scale * p[j] * (d[j0 + j] - dot);
    }
    for (int j = n; j < end; ++j) d[j] = 0.0f;
    if (ds != dp)
      dispatch_storage(ty.ds, [&](auto tag) {
        narrow_span(reinterpret_cast<decltype(tag)*>(at(ds, static_cast<size_t>(r) * T, ty.ds)), d, end);
      });
  }

  // Grouped heads over 16-bit qkv: dK and dV sum their group's members in an fp32 [B·T, 2·KV·HS]
  // (k then v, as in a qkv row; a 16-bit output cannot accumulate), rounded once into dqkv after.
  const bool widen_kv = hd.G() > 1 && ty.qkv != StorageType::F32;
  const std::int64_t KVW2 = 2 * static_cast<std::int64_t>(KV) * HS;
  std::vector<float> dkv(widen_kv ? static_cast<size_t>(B) * T * KVW2 : 0);
  const GemmLayout rows_dkv{static_cast<std::int64_t>(T) * KVW2, HS, KVW2, 1};
  const auto dk_at = [&](int r0) -> std::pair<void*, StorageType> {
    if (widen_kv) return {dkv.data() + static_cast<size_t>(r0) * KVW2, StorageType::F32};
    return {at(dqkv, hd.k_at() + r0 * W, ty.qkv), ty.qkv};
  };
  const auto dv_at = [&](int r0) -> std::pair<void*, StorageType> {
    if (widen_kv) return {dkv.data() + static_cast<size_t>(r0) * KVW2 + KVW2 / 2, StorageType::F32};
    return {at(dqkv, hd.v_at() + r0 * W, ty.qkv), ty.qkv};
  };
  const GemmLayout& kv_out = widen_kv ? rows_dkv : v.rows_kv;
  const void* cds = ds;
  for (int r0 = 0; r0 < T; r0 += RB) {
    const int r1 = std::min(T, r0 + RB), k1 = mask.key_end(r1, T), q0 = mask.query_begin(r0);
    const size_t corner = static_cast<size_t>(q0) * T + r0;  // element (q0, r0) of a [T, T] matrix
    // Per member g of each group: dQ[r0:r1] = dS[r0:r1, 0:k1]·K[0:k1]; the group's dK and dV sum
    // its members' (the first writes, the rest accumulate, in g order: the same sums every run).
    for (int g = 0; g < hd.G(); ++g) {
      const size_t gs = g * TT;
      gemm_mixed(at(dqkv, r0 * W + g * HS, ty.qkv), ty.qkv, v.rows_q,
                 {at(cds, gs + static_cast<size_t>(r0) * T, ty.ds), ty.ds, v.rows_tt},
                 {at(qkv, hd.k_at(), ty.qkv), ty.qkv, v.rows_kv}, ty.scores, B, KV, r1 - r0, HS, k1, false,
                 ws, ctx);
      // dK[r0:r1] (+)= dS[q0:T, r0:r1]^T·Q[q0:T]
      const auto [dk, dk_type] = dk_at(r0);
      gemm_mixed(dk, dk_type, kv_out, {at(cds, gs + corner, ty.ds), ty.ds, v.cols_tt},
                 {at(qkv, q0 * W + g * HS, ty.qkv), ty.qkv, v.rows_q}, ty.scores, B, KV, r1 - r0, HS, T - q0,
                 g > 0, ws, ctx);
      // dV[r0:r1] (+)= P[q0:T, r0:r1]^T·dY[q0:T]
      const auto [dv, dv_type] = dv_at(r0);
      gemm_mixed(dv, dv_type, kv_out, {at(saved, gs + corner, ty.probs), ty.probs, v.cols_tt},
                 {at(dout, q0 * Cs + g * HS, ty.out), ty.out, v.rows_bt}, ty.values, B, KV, r1 - r0, HS,
                 T - q0, g > 0, ws, ctx);
    }
  }
  if (widen_kv)
    dispatch_storage(ty.qkv, [&](auto tag) {
      using S = decltype(tag);
      for (size_t row = 0; row < static_cast<size_t>(B) * T; ++row)
        narrow_span(reinterpret_cast<S*>(at(dqkv, row * W + hd.k_at(), ty.qkv)), dkv.data() + row * KVW2,
                    static_cast<size_t>(KVW2));
    });
}

}  // namespace

void check_key_mask(const char* op, const int* key_mask, int B, int T) {
  if (!key_mask) return;
  for (int b = 0; b < B; ++b) {
    const int* m = key_mask + static_cast<size_t>(b) * T;
    MPT_CHECK(std::any_of(m, m + T, [](int x) { return x != 0; }),
              std::string("[") + op + "] sequence " + std::to_string(b) + " of the batch is all padding");
  }
}

namespace {

// Packed sequences one at a time (each a batch of one sequence of its own length L, the
// products batched over the heads): sequence b reads and writes its rows from cu_seqlens[b]
// and keeps P at the running sum of NH·L² (the forward and backward agree on it); the scratch
// is not preserved, so every sequence starts it at 0. Sequences of one length could share a
// batched product; at T = 128 attention is ~3% of BERT-base's FLOPs, so one call each is kept.
template <class Run>
void for_each_packed(const int* cu, int B, int T, int NH, const AttentionTypes& ty, const char* op, Run run) {
  MPT_CHECK(cu[0] == 0, std::string("[") + op + "] cu_seqlens does not start at 0");
  size_t p_at = 0;
  for (int b = 0; b < B; ++b) {
    const int L = cu[b + 1] - cu[b];
    MPT_CHECK(L >= 1 && L <= T, std::string("[") + op + "] packed sequence " + std::to_string(b) + " has " +
                                    std::to_string(L) + " rows, not in [1, " + std::to_string(T) + "]");
    run(static_cast<size_t>(cu[b]), L, p_at * storage_bytes(ty.probs));
    p_at += static_cast<size_t>(NH) * L * L;
  }
}

// The heads of a call: kv_heads 0 means NH (multi-head attention).
Heads heads_of(const char* op, int C, int NH, int kv_heads) {
  const int kv = kv_heads ? kv_heads : NH;
  MPT_CHECK(kv > 0 && NH % kv == 0, std::string("[") + op + "] kv_heads " + std::to_string(kv_heads) +
                                        " does not divide NH = " + std::to_string(NH));
  return {NH, kv, C / NH};
}

template <class P>
P* bytes_at(P* base, size_t bytes) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<Byte*>(base) + bytes;
}

}  // namespace

void attention_forward_typed(void* out, void* saved, const void* qkv, void* scratch, const AttentionTypes& ty,
                             int B, int T, int C, int NH, GemmWorkspace& ws, Context& ctx, bool causal,
                             const int* key_mask, const int* cu_seqlens, int kv_heads) {
  check_attention_sizes("attention_forward_typed", B, T, C, NH);
  const Heads hd = heads_of("attention_forward_typed", C, NH, kv_heads);
  const size_t W = static_cast<size_t>(hd.W());
  MPT_CHECK(out && saved && qkv && scratch, "[attention_forward_typed] null pointer");
  MPT_CHECK(!causal || !key_mask, "[attention_forward_typed] a key mask is for the bidirectional form");
  if (cu_seqlens) {
    MPT_CHECK(!causal && !key_mask, "[attention_forward_typed] packed sequences are bidirectional, unmasked");
    for_each_packed(cu_seqlens, B, T, NH, ty, "attention_forward_typed", [&](size_t row, int L, size_t p) {
      forward_impl(at(out, row * C, ty.out), bytes_at(saved, p), at(qkv, row * W, ty.qkv), scratch, ty,
                   Mask{false, nullptr}, 1, L, hd, ws, ctx);
    });
    return;
  }
  check_key_mask("attention_forward_typed", key_mask, B, T);
  forward_impl(out, saved, qkv, scratch, ty, Mask{causal, key_mask}, B, T, hd, ws, ctx);
}

void attention_backward_typed(void* dqkv, const void* dout, const void* qkv, const void* saved, void* scratch,
                              const AttentionTypes& ty, int B, int T, int C, int NH, GemmWorkspace& ws,
                              Context& ctx, bool causal, const int* cu_seqlens, int kv_heads) {
  check_attention_sizes("attention_backward_typed", B, T, C, NH);
  const Heads hd = heads_of("attention_backward_typed", C, NH, kv_heads);
  const size_t W = static_cast<size_t>(hd.W());
  MPT_CHECK(dqkv && dout && qkv && saved && scratch, "[attention_backward_typed] null pointer");
  if (cu_seqlens) {
    MPT_CHECK(!causal, "[attention_backward_typed] packed sequences are bidirectional");
    for_each_packed(cu_seqlens, B, T, NH, ty, "attention_backward_typed", [&](size_t row, int L, size_t p) {
      backward_impl(at(dqkv, row * W, ty.qkv), at(dout, row * C, ty.out), at(qkv, row * W, ty.qkv),
                    bytes_at(saved, p), scratch, ty, Mask{false, nullptr}, 1, L, hd, ws, ctx);
    });
    return;
  }
  backward_impl(dqkv, dout, qkv, saved, scratch, ty, Mask{causal, nullptr}, B, T, hd, ws, ctx);
}

}  // namespace mptrain::cpu
