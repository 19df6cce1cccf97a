// cuBLASLt behind gemm.h. cuBLASLt is column-major; a row-major matrix X[r,c] is the
// column-major X^T[c,r] with the same memory and leading dimension c. So the row-major
// product C = op(A)·op(B) is computed as the column-major C^T = op(B)^T·op(A)^T: cuBLAS's
// first operand is our B, its second our A, and its D is C^T[N,M] with leading dimension N.
// A transpose flag carries over unchanged (B stored [K,N] row-major is B^T[N,K] column-major:
// cuBLAS's A as stored, rows N, ld N; stored [N,K] it is [K,N] column-major with ld K, and
// cuBLAS transposes it). In these terms cuBLAS's "rows of D" are our N: the bias (length
// N, broadcast over rows of C) is cuBLAS's bias over rows of D, and our BiasGradB (sum over
// k of op(B)) is cuBLAS's BGRADA (its A is our B).
#include "backend/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/context_impl.h"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {


const char* epilogue_name(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::None:
      return "none";
    case LtEpilogue::Bias:
      return "bias";
    case LtEpilogue::GeluBias:
      return "gelu_bias";
    case LtEpilogue::DGelu:
      return "dgelu";
    case LtEpilogue::BiasGradB:
      return "bias_grad_b";
  }
  return "?";
}

GemmPlan& GemmPlan::operator=(GemmPlan&& o) noexcept {
  std::swap(desc, o.desc);
  std::swap(a, o.a);
  std::swap(b, o.b);
  std::swap(c, o.c);
  std::swap(algo, o.algo);
  return *this;
}

GemmPlan::~GemmPlan() {
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (desc) cublasLtMatmulDescDestroy(desc);
}

namespace {

cudaDataType_t cuda_type(StorageType t) {
  switch (t) {
    case StorageType::F32:
      return CUDA_R_32F;
    case StorageType::BF16:
      return CUDA_R_16BF;
    case StorageType::F16:
      return CUDA_R_16F;
    case StorageType::I32:
      break;
  }
  return CUDA_R_32F;
}

cublasLtEpilogue_t lt_epilogue(LtEpilogue e, bool has_bias) {
  switch (e) {
    case LtEpilogue::None:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case LtEpilogue::Bias:
      return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::GeluBias:
      return has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    case LtEpilogue::DGelu:
      return CUBLASLT_EPILOGUE_DGELU;
    case LtEpilogue::BiasGradB:
      return CUBLASLT_EPILOGUE_BGRADA;  // cuBLAS's A is our B (see the top of this file)
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Largest power of two dividing the address, capped at 256 (cuBLASLt's default assumption).
// Also of a byte offset (a batch stride): 0 constrains nothing.
int alignment_of_offset(uintptr_t u) {
  if (u == 0) return 256;
  int a = 1;
  while (a < 256 && (u & static_cast<uintptr_t>(a)) == 0) a <<= 1;
  return a;
}
int alignment_of(const void* p) { return alignment_of_offset(reinterpret_cast<uintptr_t>(p)); }

std::string describe(const GemmKey& k) {
  return "M=" + std::to_string(k.M) + " N=" + std::to_string(k.N) + " K=" + std::to_string(k.K) +
         " trans_a=" + std::to_string(k.trans_a) + " trans_b=" + std::to_string(k.trans_b) +
         " C=" + storage_name(static_cast<StorageType>(k.tc)) +
         " A/B=" + storage_name(static_cast<StorageType>(k.tab)) +
         " math=" + compute_name(static_cast<ComputeType>(k.math)) +
         " epilogue=" + epilogue_name(static_cast<LtEpilogue>(k.epilogue % 100)) +
         " accumulate=" + std::to_string(k.accumulate) + " alignment=" + std::to_string(k.alignment) +
         (k.batch == 1 ? std::string()
                       : " batch=" + std::to_string(k.batch) + " strides=" + std::to_string(k.stride_a) +
                             "," + std::to_string(k.stride_b) + "," + std::to_string(k.stride_c));
}

// A strided batch on one layout (cuBLASLt: every layout of the product carries the count).
void set_batch(cublasLtMatrixLayout_t layout, int count, int64_t stride) {
  MPT_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  MPT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                    &stride, sizeof(stride)));
}

void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void* value, size_t size) {
  MPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, value, size));
}

// The epilogue's pointers on the descriptor. Set before the heuristic too: it does not read
// them, but cublasLt.h says it derives the bias and aux alignment it may assume from their
// values (left null, any alignment would be assumed).
void set_epilogue_pointers(cublasLtMatmulDesc_t d, const GemmEpilogue& ep) {
  if (ep.kind == LtEpilogue::Bias || (ep.kind == LtEpilogue::GeluBias && ep.bias))
    set_attr(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ep.bias, sizeof(ep.bias));
  if (ep.kind == LtEpilogue::BiasGradB)
    set_attr(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ep.bias_grad, sizeof(ep.bias_grad));
  if (ep.kind == LtEpilogue::GeluBias || ep.kind == LtEpilogue::DGelu)
    set_attr(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ep.aux, sizeof(ep.aux));
}

// The product's descriptor and layouts (no algorithm yet).
GemmPlan describe_plan(const GemmKey& k, const GemmEpilogue& ep) {
  const bool has_bias = ep.bias != nullptr;
  GemmPlan p;
  const StorageType tab = static_cast<StorageType>(k.tab);
  const StorageType tc = static_cast<StorageType>(k.tc);
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (tab == StorageType::F32 && static_cast<ComputeType>(k.math) == ComputeType::TF32)
    compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  MPT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, compute, CUDA_R_32F));
  const cublasOperation_t op_a = k.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS A = our B
  const cublasOperation_t op_b = k.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS B = our A
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a));
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b));
  // The caller's kind, not k.epilogue: the key marks GeluBias without a bias as 100 + kind.
  const LtEpilogue kind = ep.kind;
  const cublasLtEpilogue_t lt_ep = lt_epilogue(kind, has_bias);
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_ep, sizeof(lt_ep));
  if (kind != LtEpilogue::None) {
    const int32_t bias_type = cuda_type(tc);  // bias and bias gradient in C's type
    set_attr(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type));
  }
  if (kind == LtEpilogue::GeluBias || kind == LtEpilogue::DGelu) {
    const int64_t ld = k.aux_ld;
    set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld));
    const int32_t aux_type = cuda_type(tc);
    set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type, sizeof(aux_type));
  }
  const cudaDataType_t dab = cuda_type(tab), dc = cuda_type(tc);
  // cuBLAS's A = our B: [N,K] column-major when our B is not transposed, else [K,N].
  if (k.trans_b)
    MPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, dab, k.K, k.N, k.K));
  else
    MPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, dab, k.N, k.K, k.N));
  // cuBLAS's B = our A: [K,M] column-major when our A is not transposed, else [M,K].
  if (k.trans_a)
    MPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, dab, k.M, k.K, k.M));
  else
    MPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, dab, k.K, k.M, k.K));
  MPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, dc, k.N, k.M, k.N));
  if (k.batch > 1) {
    set_batch(p.a, k.batch, k.stride_b);  // cuBLAS's A is our B
    set_batch(p.b, k.batch, k.stride_a);
    set_batch(p.c, k.batch, k.stride_c);
  }

  set_epilogue_pointers(p.desc, ep);
  return p;
}

// cuBLASLt's heuristic for a described product: up to `want` algorithms, best guess first,
// within the context's workspace and the pointers' alignment.
std::vector<cublasLtMatmulHeuristicResult_t> heuristics(const GemmKey& k, const GemmPlan& p, Context::Impl& im,
                                                        int want) {
  cublasLtMatmulPreference_t pref = nullptr;
  MPT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(want));
  int found = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  {
    const uint64_t ws = im.workspace_bytes;
    const uint32_t align = static_cast<uint32_t>(k.alignment);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align));
    status = cublasLtMatmulAlgoGetHeuristic(im.lt, p.desc, p.a, p.b, p.c, p.c, pref, want, results.data(), &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0)
    throw LibraryError("[gemm] cuBLASLt has no algorithm for " + describe(k) + " (" +
                       cublasLtGetStatusName(status) + ")");
  results.resize(static_cast<size_t>(found));
  return results;
}

// The plan gemm() caches: the heuristic's first algorithm.
GemmPlan make_plan(const GemmKey& k, const GemmEpilogue& ep, Context::Impl& im) {
  GemmPlan p = describe_plan(k, ep);
  p.algo = heuristics(k, p, im, 1).front().algo;
  return p;
}

// The plan key of a product, its arguments checked; M, N or a batch count of 0 leaves
// *empty true (nothing to compute).
GemmKey checked_key(const void* c, StorageType tc, const void* a, const void* b, StorageType tab, int M, int N,
                    int K, bool trans_a, bool trans_b, bool accumulate, ComputeType math, const GemmEpilogue& ep,
                    const GemmBatch& batch, bool* empty) {
  *empty = false;
  GemmKey k;
  k.M = M, k.N = N, k.K = K;
  k.trans_a = trans_a, k.trans_b = trans_b, k.accumulate = accumulate;
  k.tc = static_cast<int>(tc), k.tab = static_cast<int>(tab);
  // fp32 operands: fp32 or TF32 products; 16-bit operands multiply in their own format.
  k.math = static_cast<int>(tab == StorageType::F32 && math == ComputeType::TF32 ? ComputeType::TF32 : ComputeType::F32);
  k.epilogue = static_cast<int>(ep.kind);
  k.batch = batch.count;
  if (batch.count != 1) k.stride_a = batch.stride_a, k.stride_b = batch.stride_b, k.stride_c = batch.stride_c;
  MPT_CHECK(M >= 0 && N >= 0 && K >= 0, "[gemm] negative size: " + describe(k));
  MPT_CHECK(batch.count >= 0 && k.stride_a >= 0 && k.stride_b >= 0 && k.stride_c >= 0,
            "[gemm] negative batch count or stride: " + describe(k));
  MPT_CHECK(batch.count <= 1 || ep.kind == LtEpilogue::None,
            "[gemm] a batched product takes no epilogue: " + describe(k));
  MPT_CHECK(tc == tab || tc == StorageType::F32,
            "[gemm] C must have the operands' type or fp32: " + describe(k));
  if (M == 0 || N == 0 || batch.count == 0) {
    *empty = true;
    return k;
  }
  // An empty sum (K == 0) would need cuBLASLt layouts with a zero dimension; no caller has one.
  MPT_CHECK(K > 0, "[gemm] K must be positive: " + describe(k));
  MPT_CHECK(c && a && b, "[gemm] null pointer: " + describe(k));
  const bool uses_aux = ep.kind == LtEpilogue::GeluBias || ep.kind == LtEpilogue::DGelu;
  MPT_CHECK(ep.kind != LtEpilogue::Bias || ep.bias, "[gemm] the bias epilogue needs a bias: " + describe(k));
  MPT_CHECK(ep.kind != LtEpilogue::BiasGradB || ep.bias_grad,
            "[gemm] the bias-gradient epilogue needs bias_grad: " + describe(k));
  MPT_CHECK(!uses_aux || ep.aux, "[gemm] the GELU epilogues need aux: " + describe(k));
  MPT_CHECK(!uses_aux || N % 8 == 0, "[gemm] the GELU epilogues need N % 8 == 0: " + describe(k));
  MPT_CHECK(ep.kind != LtEpilogue::DGelu || !accumulate,
            "[gemm] DGelu overwrites C (accumulate=false): " + describe(k));
  if (uses_aux) k.aux_ld = N;
  const bool has_bias = ep.bias != nullptr;
  int align = 256;
  for (const void* p : {static_cast<const void*>(c), a, b, ep.bias, static_cast<const void*>(ep.bias_grad),
                        static_cast<const void*>(ep.aux)})
    align = std::min(align, alignment_of(p));
  // Every matrix of a batch must have the promised alignment, not just the first.
  if (batch.count > 1) {
    const size_t sab = storage_bytes(tab), sc = storage_bytes(tc);
    for (size_t stride_bytes : {static_cast<size_t>(k.stride_a) * sab, static_cast<size_t>(k.stride_b) * sab,
                                static_cast<size_t>(k.stride_c) * sc})
      align = std::min(align, alignment_of_offset(stride_bytes));
  }
  k.alignment = align;
  // GeluBias without a bias is another cuBLASLt epilogue: keep it a distinct plan.
  if (ep.kind == LtEpilogue::GeluBias && !has_bias) k.epilogue = 100 + static_cast<int>(ep.kind);
  return k;
}

// gemm() and gemm_batched(): one product (batch.count 1) or a strided batch.
// C = alpha·op(A)·op(B) + beta·C; the plan's `accumulate` is beta != 0 (C is read).
void gemm_impl(void* c, StorageType tc, const void* a, const void* b, StorageType tab, int M, int N, int K,
               bool trans_a, bool trans_b, float alpha, float beta, ComputeType math, const GemmEpilogue& ep,
               const GemmBatch& batch, Context& ctx) {
  bool empty = false;
  const GemmKey k =
      checked_key(c, tc, a, b, tab, M, N, K, trans_a, trans_b, beta != 0.0f, math, ep, batch, &empty);
  if (empty) return;
  Context::Impl& im = ctx.impl();
  auto it = im.plans.find(k);
  if (it == im.plans.end()) it = im.plans.emplace(k, make_plan(k, ep, im)).first;
  GemmPlan& p = it->second;
  set_epilogue_pointers(p.desc, ep);
  MPT_CUBLAS_CHECK(cublasLtMatmul(im.lt, p.desc, &alpha, b, p.a, a, p.b, &beta, c, p.c, c, p.c, &p.algo,
                                  im.workspace, im.workspace_bytes, im.stream));
}

}  // namespace

void gemm(void* c, StorageType tc, const void* a, const void* b, StorageType tab, int M, int N, int K,
          bool trans_a, bool trans_b, bool accumulate, ComputeType math, const GemmEpilogue& ep, Context& ctx) {
  MPT_PROFILE_RANGE("gemm");
  gemm_impl(c, tc, a, b, tab, M, N, K, trans_a, trans_b, 1.0f, accumulate ? 1.0f : 0.0f, math, ep,
            GemmBatch{}, ctx);
}

void gemm_batched(void* c, StorageType tc, const void* a, const void* b, StorageType tab, int M, int N, int K,
                  bool trans_a, bool trans_b, bool accumulate, ComputeType math, const GemmBatch& batch,
                  Context& ctx) {
  MPT_PROFILE_RANGE("gemm_batched");
  gemm_impl(c, tc, a, b, tab, M, N, K, trans_a, trans_b, 1.0f, accumulate ? 1.0f : 0.0f, math, GemmEpilogue{},
            batch, ctx);
}

void gemm_scaled(void* c, StorageType tc, const void* a, const void* b, StorageType tab, int M, int N, int K,
                 bool trans_a, bool trans_b, float alpha, float beta, ComputeType math, Context& ctx) {
  MPT_PROFILE_RANGE("gemm_scaled");
  gemm_impl(c, tc, a, b, tab, M, N, K, trans_a, trans_b, alpha, beta, math, GemmEpilogue{}, GemmBatch{}, ctx);
}

size_t gemm_plan_count(Context& ctx) { return ctx.impl().plans.size(); }

namespace {

int algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  uint32_t v = 0;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS)
    return -1;
  return static_cast<int>(v);
}

}  // namespace

std::vector<GemmAlgoTiming> gemm_sweep(void* c, StorageType tc, const void* a, const void* b, StorageType tab,
                                       int M, int N, int K, bool trans_a, bool trans_b, bool accumulate,
                                       ComputeType math, const GemmEpilogue& ep, int max_algos, int iters,
                                       Context& ctx) {
  bool empty = false;
  const GemmKey k = checked_key(c, tc, a, b, tab, M, N, K, trans_a, trans_b, accumulate, math, ep, GemmBatch{},
                                &empty);
  MPT_CHECK(!empty && max_algos > 0 && iters > 0, "[gemm_sweep] nothing to time: " + describe(k));
  Context::Impl& im = ctx.impl();
  const GemmPlan p = describe_plan(k, ep);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  cudaEvent_t start = nullptr, stop = nullptr;
  MPT_CUDA_CHECK(cudaEventCreate(&start));
  MPT_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<GemmAlgoTiming> out;
  const auto results = heuristics(k, p, im, max_algos);
  for (size_t r = 0; r < results.size(); ++r) {
    const cublasLtMatmulAlgo_t& algo = results[r].algo;
    const auto launch = [&] {
      return cublasLtMatmul(im.lt, p.desc, &alpha, b, p.a, a, p.b, &beta, c, p.c, c, p.c, &algo, im.workspace,
                            im.workspace_bytes, im.stream);
    };
    GemmAlgoTiming t{static_cast<int>(r), -1.0f, algo_config(algo, CUBLASLT_ALGO_CONFIG_ID),
                     algo_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                     algo_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                     algo_config(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME), results[r].wavesCount};
    bool ok = launch() == CUBLAS_STATUS_SUCCESS && launch() == CUBLAS_STATUS_SUCCESS;  // warm-up
    if (ok) {
      MPT_CUDA_CHECK(cudaEventRecord(start, im.stream));
      for (int i = 0; i < iters && ok; ++i) ok = launch() == CUBLAS_STATUS_SUCCESS;
      MPT_CUDA_CHECK(cudaEventRecord(stop, im.stream));
      MPT_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      MPT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (ok) t.ms = ms / static_cast<float>(iters);
    }
    out.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return out;
}

}  // namespace mptrain::cuda
