// A cached cuBLASLt matmul: the descriptor, the three layouts and the chosen algorithm,
// keyed by everything that decides them (sizes, transposes, dtypes, math mode, epilogue,
// accumulate, pointer alignment, batch count and strides). Built on the first call of a key and reused
// afterwards, so no descriptor or heuristic query happens inside a steady-state training step.
#pragma once
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace mptrain::cuda {

struct GemmKey {
  int M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false, accumulate = false;
  int tc = 0, tab = 0;  // StorageType of C and of A/B
  int math = 0;         // ComputeType (F32 or TF32)
  int epilogue = 0;     // Epilogue
  int64_t aux_ld = 0;
  int alignment = 0;  // smallest power-of-two alignment of the pointers, capped at 256 bytes
  int batch = 1;      // GemmBatch: count and strides (elements); 1 and 0s for a plain product
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  bool operator==(const GemmKey&) const = default;
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const {
    const int64_t parts[] = {k.M,     k.N,        k.K,        k.trans_a,  k.trans_b, k.accumulate,
                             k.tc,    k.tab,      k.math,     k.epilogue, k.aux_ld,  k.alignment,
                             k.batch, k.stride_a, k.stride_b, k.stride_c};
    size_t h = 0;
    for (int64_t p : parts) h = h * 1000003u ^ std::hash<int64_t>{}(p);
    return h;
  }
};

class GemmPlan {
 public:
  GemmPlan() = default;
  GemmPlan(GemmPlan&& o) noexcept { *this = std::move(o); }
  GemmPlan& operator=(GemmPlan&& o) noexcept;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  ~GemmPlan();

  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLAS's A, B, C=D
  cublasLtMatmulAlgo_t algo{};
};

}  // namespace mptrain::cuda
