// Mixed-precision GEMMs: operands not already in the arithmetic's format are converted into
// the workspace (packed, keeping the operand's contiguous direction contiguous), then one
// gemm_batched_typed call runs on oneDNN. See backend/ops/gemm_mixed.h.
#include "backend/ops/gemm_mixed.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cpu/lowp.h"
#include "backend/ops/convert.h"
#include "core/error.h"

namespace mptrain::cpu {

namespace {

// Columns per task of the bias-gradient reduction: 256-byte strips, no false sharing between
// threads. bias_backward_typed is the one column-sum kernel (fp32 linear layers call it too).
constexpr int kBiasStrip = 64;

const char* byte_ptr(const void* p) { return static_cast<const char*>(p); }

// Packs operand x ([nb0][nb1][R][Cc] through its layout) into dst in storage dt and format m;
// returns the packed layout.
GemmLayout pack(void* dst, StorageType dt, const GemmOperand& x, ComputeType m, int nb0, int nb1, int R,
                int Cc) {
  const size_t es = storage_bytes(x.type), ed = storage_bytes(dt);
  const GemmLayout& l = x.layout;
  const std::int64_t mat = static_cast<std::int64_t>(R) * Cc;
  const bool by_cols = l.row == 1 && l.col != 1;  // contiguous down a column: pack column-major
  const GemmLayout out = by_cols ? GemmLayout{nb1 * mat, mat, 1, R} : GemmLayout{nb1 * mat, mat, Cc, 1};
  const int outer = by_cols ? Cc : R, inner = by_cols ? R : Cc;
  const std::int64_t outer_stride = by_cols ? l.col : l.row, inner_stride = by_cols ? l.row : l.col;
  const long long runs = static_cast<long long>(nb0) * nb1 * outer;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < runs; ++r) {
    const std::int64_t o = r % outer, ij = r / outer, i = ij / nb1, j = ij % nb1;
    const std::int64_t src_off = i * l.batch0 + j * l.batch1 + o * outer_stride;
    char* d = static_cast<char*>(dst) + (ij * mat + o * inner) * ed;
    if (inner_stride == 1) {
      format_run(d, dt, byte_ptr(x.ptr) + src_off * es, x.type, inner, m);
    } else {
      for (int e = 0; e < inner; ++e)
        format_run(d + e * ed, dt, byte_ptr(x.ptr) + (src_off + e * inner_stride) * es, x.type, 1, m);
    }
  }
  return out;
}

bool needs_conversion(const GemmOperand& x, StorageType operand_storage, ComputeType m) {
  if (x.type != operand_storage) return true;
  if (x.ready) return false;
  // Stored in the operand storage: that is the format itself, except for TF32 (fp32 values
  // still to be rounded) and emulated fp16 or bf16 (fp32 values still to be rounded).
  return m == ComputeType::TF32 ||
         ((m == ComputeType::F16 || m == ComputeType::BF16) && operand_storage == StorageType::F32);
}

}  // namespace

void format_run(void* d, StorageType dt, const void* s, StorageType st, size_t len, ComputeType m) {
  // fp32 in, and the format is the storage's own rounding (no TF32, no 16-bit value held in fp32):
  // one narrowing, no staging copy (AdamW's fused weight copy runs here on every block).
  if (st == StorageType::F32 && m != ComputeType::TF32 && (dt != StorageType::F32 || m == ComputeType::F32)) {
    dispatch_storage(dt, [&](auto dtag) { narrow_span(static_cast<decltype(dtag)*>(d), static_cast<const float*>(s), len); });
    return;
  }
  float tmp[kChunk];
  for (size_t i0 = 0; i0 < len; i0 += kChunk) {
    const size_t n = std::min(kChunk, len - i0);
    dispatch_storage(st, [&](auto stag) { widen_span(tmp, static_cast<const decltype(stag)*>(s) + i0, n); });
    if (m == ComputeType::TF32) tf32_span(tmp, tmp, n);
    if (m == ComputeType::F16 && dt == StorageType::F32) {  // emulated fp16: round to fp16, hold in fp32
      Fp16 h[kChunk];
      narrow_span(h, tmp, n);
      widen_span(tmp, h, n);
    }
    if (m == ComputeType::BF16 && dt == StorageType::F32) {  // emulated bf16: round to bf16, hold in fp32
      Bf16 h[kChunk];
      narrow_span(h, tmp, n);
      widen_span(tmp, h, n);
    }
    dispatch_storage(dt, [&](auto dtag) { narrow_span(static_cast<decltype(dtag)*>(d) + i0, tmp, n); });
  }
}

GemmWorkspace::GemmWorkspace(Context& ctx)
    : fp16_native_(gemm_supports(StorageType::F32, StorageType::F16, StorageType::F16, ctx)),
      bf16_native_(gemm_supports(StorageType::F32, StorageType::BF16, StorageType::BF16, ctx)) {}

void* GemmWorkspace::slot(int i, size_t bytes) {
  FloatBuffer& b = slots_[i];
  if (b.size() * sizeof(float) < bytes) b.resize((bytes + sizeof(float) - 1) / sizeof(float));
  return b.data();
}

void to_gemm_operand(void* dst, const void* src, StorageType st, size_t n, ComputeType m,
                     const GemmWorkspace& ws) {
  const StorageType dt = ws.operand_storage(m);
  if (m == ComputeType::F32 || m == ComputeType::BF16 || (m == ComputeType::F16 && dt == StorageType::F16)) {
    convert(dst, dt, src, st, n);
    return;
  }
  const std::ptrdiff_t chunks = static_cast<std::ptrdiff_t>((n + kChunk - 1) / kChunk);
  const size_t es = storage_bytes(st), ed = storage_bytes(dt);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t c = 0; c < chunks; ++c) {
    const size_t i0 = static_cast<size_t>(c) * kChunk, len = std::min(kChunk, n - i0);
    format_run(static_cast<char*>(dst) + i0 * ed, dt, byte_ptr(src) + i0 * es, st, len, m);
  }
}

void gemm_mixed(void* c, StorageType tc, GemmLayout lc, const GemmOperand& a, const GemmOperand& b,
                ComputeType math, int nb0, int nb1, int M, int N, int K, bool accumulate, GemmWorkspace& ws,
                Context& ctx) {
  MPT_CHECK(!accumulate || tc == StorageType::F32,
            std::string("[gemm_mixed] accumulating into a ") + storage_name(tc) + " output (needs fp32)");
  MPT_CHECK(nb0 >= 0 && nb1 >= 0 && M >= 0 && N >= 0 && K >= 0, "[gemm_mixed] negative size");
  if (nb0 == 0 || nb1 == 0 || M == 0 || N == 0) return;
  const StorageType ot = ws.kernel_storage(math);
  const void* pa = a.ptr;
  const void* pb = b.ptr;
  GemmLayout la = a.layout, lb = b.layout;
  if (K > 0 && needs_conversion(a, ot, math)) {
    void* d = ws.slot(0, static_cast<size_t>(nb0) * nb1 * M * K * storage_bytes(ot));
    la = pack(d, ot, a, math, nb0, nb1, M, K);
    pa = d;
  }
  if (K > 0 && needs_conversion(b, ot, math)) {
    void* d = ws.slot(1, static_cast<size_t>(nb0) * nb1 * K * N * storage_bytes(ot));
    lb = pack(d, ot, b, math, nb0, nb1, K, N);
    pb = d;
  }
  if (tc == StorageType::F32 || tc == ot) {
    gemm_batched_typed(c, tc, lc, pa, ot, la, pb, ot, lb, nb0, nb1, M, N, K, accumulate, ctx);
    return;
  }
  // A 16-bit output the kernel cannot write: accumulate in fp32, then round into c.
  const std::int64_t mat = static_cast<std::int64_t>(M) * N;
  float* acc = static_cast<float*>(ws.slot(2, static_cast<size_t>(nb0) * nb1 * mat * sizeof(float)));
  const GemmLayout lacc{nb1 * mat, mat, N, 1};
  gemm_batched_typed(acc, StorageType::F32, lacc, pa, ot, la, pb, ot, lb, nb0, nb1, M, N, K, false, ctx);
  const size_t ed = storage_bytes(tc);
  const long long rows = static_cast<long long>(nb0) * nb1 * M;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const std::int64_t m = r % M, ij = r / M, i = ij / nb1, j = ij % nb1;
    char* dst = static_cast<char*>(c) + (i * lc.batch0 + j * lc.batch1 + m * lc.row) * ed;
    const float* src = acc + ij * mat + m * N;
    dispatch_storage(tc, [&](auto tag) {
      using T = decltype(tag);
      if (lc.col == 1) {
        narrow_span(reinterpret_cast<T*>(dst), src, N);
      } else {
        for (int q = 0; q < N; ++q) narrow_span(reinterpret_cast<T*>(dst + q * lc.col * ed), src + q, 1);
      }
    });
  }
}

void bias_forward_typed(void* out, StorageType to, const float* acc, const float* bias, int N, int OC) {
  MPT_CHECK(N >= 0 && OC >= 0, "[bias_forward_typed] negative size");
  const size_t eo = storage_bytes(to);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* a = acc + static_cast<size_t>(n) * OC;
    char* o = static_cast<char*>(out) + static_cast<size_t>(n) * OC * eo;
    float tmp[kChunk];
    for (int c0 = 0; c0 < OC; c0 += static_cast<int>(kChunk)) {
      const int len = std::min(static_cast<int>(kChunk), OC - c0);
      if (bias)
        for (int c = 0; c < len; ++c) tmp[c] = a[c0 + c] + bias[c0 + c];
      else
        for (int c = 0; c < len; ++c) tmp[c] = a[c0 + c];
      dispatch_storage(to,
                       [&](auto tag) { narrow_span(reinterpret_cast<decltype(tag)*>(o) + c0, tmp, len); });
    }
  }
}

void bias_backward_typed(float* dbias, const void* dout, StorageType t, int N, int OC) {
  MPT_CHECK(N >= 0 && OC >= 0, "[bias_backward_typed] negative size");
  const int strips = (OC + kBiasStrip - 1) / kBiasStrip;
  const size_t es = storage_bytes(t);
#pragma omp parallel for schedule(static)
  for (int s = 0; s < strips; ++s) {
    const int o0 = s * kBiasStrip;
    const int width = std::min(kBiasStrip, OC - o0);
    float acc[kBiasStrip] = {}, row[kBiasStrip];
    for (int n = 0; n < N; ++n) {
      const char* src = static_cast<const char*>(dout) + (static_cast<size_t>(n) * OC + o0) * es;
      dispatch_storage(
          t, [&](auto tag) { widen_span(row, reinterpret_cast<const decltype(tag)*>(src), width); });
      for (int o = 0; o < width; ++o) acc[o] += row[o];
    }
    for (int o = 0; o < width; ++o) dbias[o0 + o] += acc[o];
  }
}

}  // namespace mptrain::cpu
