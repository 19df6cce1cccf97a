// Matrix products in a chosen arithmetic (fp32, TF32, bf16, fp16) on operands stored in any
// storage dtype, with fp32 accumulation: the GEMM behind mixed precision.
//
// The arithmetic (ComputeType) fixes the operand format the kernel reads:
//   F32   fp32 operands                       (oneDNN fp32 kernels)
//   TF32  fp32 operands rounded to TF32       (CPU emulation: round, then the fp32 kernel)
//   BF16  bf16 operands, fp32 accumulation    (oneDNN's bf16 kernels where the CPU has them —
//         AVX512-BF16 / AMX, or AVX-512; on an AVX2-only CPU oneDNN has none, and bf16 values
//         held in fp32 go through the fp32 kernel: exact, as a bf16 product is exact in fp32)
//   F16   fp16 operands, fp32 accumulation    (oneDNN's fp16 kernel where the CPU has
//         AVX512-FP16; elsewhere emulated exactly: fp16 values widened to fp32 — a product of
//         two fp16 values is exact in fp32 — and the fp32 kernel)
// An operand already stored in that format (a weight copy, an activation saved in bf16) is
// read in place through its strides; any other is converted into the workspace first, so any
// combination of storage and arithmetic is correct, and the model's hot path is copy-free.
#pragma once
#include <cstddef>

#include "backend/ops/gemm.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "precision/policy.h"

namespace mptrain::cpu {

// One operand: data, its storage dtype and strides (in elements, see GemmLayout). `ready`
// promises that the values are already in the arithmetic's format (e.g. a weight copy rounded
// to TF32, or fp16 values held in fp32 for the emulated fp16 GEMM), so no conversion is needed.
struct GemmOperand {
  const void* ptr;
  StorageType type;
  GemmLayout layout;
  bool ready = false;
};

// Conversion buffers for operands that are not in the arithmetic's format, and what this CPU's
// oneDNN can do. One per model; grows to the largest need, then stays.
class GemmWorkspace {
 public:
  explicit GemmWorkspace(Context& ctx);
  // What make_policy needs to know of this CPU.
  BackendCaps caps() const { return {fp16_native_}; }
  // The storage a GEMM of this arithmetic reads its operands in (fp16 emulated: fp32).
  StorageType operand_storage(ComputeType m) const { return mptrain::operand_storage(m, caps()); }
  // The storage oneDNN's kernel reads: the operand storage, except bf16 on a CPU without bf16
  // kernels, whose bf16 operands are widened to fp32 inside gemm_mixed (so the plans, and what
  // `explain` prints, are the same on every CPU).
  StorageType kernel_storage(ComputeType m) const {
    return m == ComputeType::BF16 && !bf16_native_ ? StorageType::F32 : operand_storage(m);
  }
  void* slot(int i, size_t bytes);  // i in [0, 3): a, b, c

 private:
  bool fp16_native_;
  bool bf16_native_;
  FloatBuffer slots_[3];
};

// d[0, len) (storage dt) = s[0, len) (storage st) in the format of arithmetic m, on the calling
// thread: the one rounding every operand conversion goes through (to_gemm_operand, the packing,
// AdamW's fused copy), so a copy made anywhere has the same bits.
void format_run(void* d, StorageType dt, const void* s, StorageType st, size_t len, ComputeType m);

// dst[n] (in ws.operand_storage(m), contiguous) = src[n] (dtype st) in the arithmetic's
// format: exact widening, TF32 rounding, or RNE to bf16/fp16. The result is `ready`.
void to_gemm_operand(void* dst, const void* src, StorageType st, size_t n, ComputeType m,
                     const GemmWorkspace& ws);

// gemm_batched_typed with an arithmetic: C_ij[M,N] (=, or += when accumulate) A_ij·B_ij for
// (i, j) in [0,nb0)×[0,nb1). c is fp32 or a 16-bit type (a 16-bit c is written once, rounded
// from the fp32 accumulator; accumulate needs an fp32 c).
void gemm_mixed(void* c, StorageType tc, GemmLayout lc, const GemmOperand& a, const GemmOperand& b,
                ComputeType math, int nb0, int nb1, int M, int N, int K, bool accumulate, GemmWorkspace& ws,
                Context& ctx);

// The linear layer's elementwise halves around a mixed GEMM (weights [C, OC], Conv1D layout):
//   out[N,OC] (dtype to) = round(acc[N,OC] + bias[OC])      (bias may be null; out may be acc
//                                                             when to is fp32)
//   dbias[OC] += column sums of dout[N,OC] (dtype t), fp32 sums in row order (thread-independent)
void bias_forward_typed(void* out, StorageType to, const float* acc, const float* bias, int N, int OC);
void bias_backward_typed(float* dbias, const void* dout, StorageType t, int N, int OC);

}  // namespace mptrain::cpu
