// The CPU context and the only code that touches oneDNN: the engine, the stream, and a cache of
// matmul primitives keyed by (batch, M, N, K, operand strides, dtypes, accumulate), here so that
// dnnl.hpp stays private to one file.
#include "backend/cpu/context.h"

#include <oneapi/dnnl/dnnl_debug.h>

#include <array>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "backend/cpu/amx_gemm.h"
#include "backend/ops/gemm.h"
#include "core/error.h"

namespace mptrain::cpu {

namespace {

// Every field that changes the primitive oneDNN builds.
struct MatmulKey {
  std::array<std::int64_t, 21> v{};
  bool operator==(const MatmulKey& o) const { return v == o.v; }
};

struct MatmulKeyHash {
  size_t operator()(const MatmulKey& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    for (std::int64_t x : k.v) {
      h ^= static_cast<uint64_t>(x);
      h *= 1099511628211ull;
    }
    return static_cast<size_t>(h);
  }
};

// A built primitive plus its three memory objects; each call only swaps the data handles.
struct MatmulEntry {
  dnnl::matmul prim;
  dnnl::memory src, weights, dst;
  std::unordered_map<int, dnnl::memory> args;
};

[[noreturn]] void rethrow(const dnnl::error& e, const char* call, const std::string& detail, const char* file,
                          int line) {
  throw_library_error(
      "oneDNN", call,
      std::string(e.what()) + " (" + dnnl_status2str(e.status) + ")" + (detail.empty() ? "" : "; " + detail),
      file, line);
}

}  // namespace

struct Context::Impl {
  dnnl::engine engine;
  dnnl::stream stream;
  std::unordered_map<MatmulKey, MatmulEntry, MatmulKeyHash> matmuls;
  AmxBuffers amx;  // the AMX products' packing buffers (backend/cpu/amx_gemm.h)

  Impl() {
    try {
      engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
      stream = dnnl::stream(engine);
    } catch (const dnnl::error& e) {
      rethrow(e, "engine/stream creation", "", __FILE__, __LINE__);
    }
  }

  MatmulEntry& matmul(const MatmulKey& key, int nb0, int nb1, int M, int N, int K, GemmLayout lc,
                      GemmLayout la, GemmLayout lb, bool accumulate, StorageType tc, StorageType ta,
                      StorageType tb);
};

Context::Context() : impl_(std::make_unique<Impl>()) {}
Context::~Context() = default;

namespace {

std::string describe(int nb0, int nb1, int M, int N, int K, GemmLayout lc, GemmLayout la, GemmLayout lb,
                     bool accumulate) {
  auto lay = [](GemmLayout l) {
    return "{" + std::to_string(l.batch0) + "," + std::to_string(l.batch1) + "," + std::to_string(l.row) +
           "," + std::to_string(l.col) + "}";
  };
  return "batch " + std::to_string(nb0) + "x" + std::to_string(nb1) + ", M=" + std::to_string(M) +
         " N=" + std::to_string(N) + " K=" + std::to_string(K) + ", strides c" + lay(lc) + " a" + lay(la) +
         " b" + lay(lb) + (accumulate ? ", accumulate" : "");
}

// A 2-D descriptor when there is a single matrix (oneDNN picks its best kernels for plain 2-D
// problems), otherwise 4-D with the two batch dimensions first.
dnnl::memory::data_type dnnl_type(StorageType t) {
  switch (t) {
    case StorageType::BF16:
      return dnnl::memory::data_type::bf16;
    case StorageType::F16:
      return dnnl::memory::data_type::f16;
    case StorageType::F32:
    case StorageType::I32:
      break;
  }
  return dnnl::memory::data_type::f32;
}

dnnl::memory::desc make_desc(int nb0, int nb1, std::int64_t rows, std::int64_t cols, GemmLayout l, StorageType t) {
  using dnnl::memory;
  if (nb0 == 1 && nb1 == 1) return memory::desc({rows, cols}, dnnl_type(t), {l.row, l.col});
  return memory::desc({nb0, nb1, rows, cols}, dnnl_type(t), {l.batch0, l.batch1, l.row, l.col});
}

}  // namespace

MatmulEntry& Context::Impl::matmul(const MatmulKey& key, int nb0, int nb1, int M, int N, int K, GemmLayout lc,
                                   GemmLayout la, GemmLayout lb, bool accumulate, StorageType tc,
                                   StorageType ta, StorageType tb) {
  auto it = matmuls.find(key);
  if (it != matmuls.end()) return it->second;
  try {
    auto src_md = make_desc(nb0, nb1, M, K, la, ta);
    auto wei_md = make_desc(nb0, nb1, K, N, lb, tb);
    auto dst_md = make_desc(nb0, nb1, M, N, lc, tc);
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.0f);  // dst = matmul + 1·dst, i.e. beta = 1
      attr.set_post_ops(po);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_md, dst_md), attr, engine);
    MatmulEntry e;
    e.prim = dnnl::matmul(pd);
    e.src = dnnl::memory(src_md, engine, nullptr);
    e.weights = dnnl::memory(wei_md, engine, nullptr);
    e.dst = dnnl::memory(dst_md, engine, nullptr);
    e.args = {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_WEIGHTS, e.weights}, {DNNL_ARG_DST, e.dst}};
    return matmuls.emplace(key, std::move(e)).first->second;
  } catch (const dnnl::error& e) {
    rethrow(e, "matmul primitive creation",
            describe(nb0, nb1, M, N, K, lc, la, lb, accumulate) + ", types c/a/b " + storage_name(tc) + "/" +
                storage_name(ta) + "/" + storage_name(tb),
            __FILE__, __LINE__);
  }
}

namespace {

// The checks and the empty cases both paths share: true when nothing is left to multiply.
bool trivial_gemm(void* c, StorageType tc, GemmLayout lc, const void* a, GemmLayout la, const void* b, GemmLayout lb,
                  int nb0, int nb1, int M, int N, int K, bool accumulate) {
  MPT_CHECK(nb0 >= 0 && nb1 >= 0 && M >= 0 && N >= 0 && K >= 0,
            "[gemm] negative size: " + describe(nb0, nb1, M, N, K, lc, la, lb, accumulate));
  if (nb0 == 0 || nb1 == 0 || M == 0 || N == 0) return true;
  MPT_CHECK(c != nullptr && (K == 0 || (a != nullptr && b != nullptr)), "[gemm] null operand pointer");
  if (K == 0) {  // an empty sum: C = 0, or unchanged when accumulating
    if (!accumulate) {
      const size_t bytes = storage_bytes(tc);
      for (int i = 0; i < nb0; ++i)
        for (int j = 0; j < nb1; ++j)
          for (int r = 0; r < M; ++r)
            for (int q = 0; q < N; ++q)
              std::memset(static_cast<char*>(c) + (i * lc.batch0 + j * lc.batch1 + r * lc.row + q * lc.col) * bytes,
                          0, bytes);
    }
    return true;
  }
  return false;
}

}  // namespace

void gemm_onednn(void* c, StorageType tc, GemmLayout lc, const void* a, StorageType ta, GemmLayout la, const void* b,
                 StorageType tb, GemmLayout lb, int nb0, int nb1, int M, int N, int K, bool accumulate, Context& ctx) {
  if (trivial_gemm(c, tc, lc, a, la, b, lb, nb0, nb1, M, N, K, accumulate)) return;
  MatmulKey key;
  key.v = {nb0,       nb1,       M,      N,      K,         lc.batch0, lc.batch1, lc.row, lc.col, la.batch0, la.batch1,
           la.row,    la.col,    lb.batch0, lb.batch1, lb.row, lb.col, accumulate, static_cast<int>(tc),
           static_cast<int>(ta), static_cast<int>(tb)};
  Context::Impl& impl = ctx.impl();
  MatmulEntry& e = impl.matmul(key, nb0, nb1, M, N, K, lc, la, lb, accumulate, tc, ta, tb);
  try {
    // oneDNN takes non-const handles for every operand; it only reads src and weights.
    e.src.set_data_handle(const_cast<void*>(a));
    e.weights.set_data_handle(const_cast<void*>(b));
    e.dst.set_data_handle(c);
    e.prim.execute(impl.stream, e.args);
    impl.stream.wait();
  } catch (const dnnl::error& err) {
    rethrow(err, "matmul execute", describe(nb0, nb1, M, N, K, lc, la, lb, accumulate), __FILE__, __LINE__);
  }
}

void gemm_batched_typed(void* c, StorageType tc, GemmLayout lc, const void* a, StorageType ta, GemmLayout la,
                        const void* b, StorageType tb, GemmLayout lb, int nb0, int nb1, int M, int N, int K,
                        bool accumulate, Context& ctx) {
  if (trivial_gemm(c, tc, lc, a, la, b, lb, nb0, nb1, M, N, K, accumulate)) return;
  // bf16 on our AMX kernel where MPTRAIN_AMX=1 asks for it and the CPU has the tiles, else oneDNN
  // (itself on the tiles where it has them: faster on the host measured, backend/cpu/amx_gemm.h).
  if (amx_enabled() && amx_gemm(c, tc, lc, a, ta, la, b, tb, lb, nb0, nb1, M, N, K, accumulate, ctx.impl().amx))
    return;
  gemm_onednn(c, tc, lc, a, ta, la, b, tb, lb, nb0, nb1, M, N, K, accumulate, ctx);
}

bool gemm_supports(StorageType tc, StorageType ta, StorageType tb, Context& ctx) {
  try {
    const GemmLayout l{0, 0, 16, 1};
    MatmulKey key;
    key.v = {1, 1, 16, 16, 16, 0, 0, 16, 1, 0, 0, 16, 1, 0, 0, 16, 1, 0, static_cast<int>(tc), static_cast<int>(ta),
             static_cast<int>(tb)};
    ctx.impl().matmul(key, 1, 1, 16, 16, 16, l, l, l, false, tc, ta, tb);
    return true;
  } catch (const LibraryError&) {
    return false;  // e.g. fp16 matmul on a CPU without AVX512-FP16
  }
}

}  // namespace mptrain::cpu
