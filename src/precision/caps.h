// What a backend can compute, as the precision policy needs to know it (make_policy's BackendCaps),
// and the one rule that follows from it for every GEMM: the storage its operands are read in. The
// policy (Policy::operand), the backends (Backend::operand_storage) and the CPU's GEMM workspace
// all ask this one function, so the answer cannot differ between them.
#pragma once
#include "core/dtype.h"

namespace mptrain {

struct BackendCaps {
  // fp16 GEMM kernels (oneDNN's where the CPU has AVX512-FP16; tensor cores on a GPU). Without
  // them an fp16 GEMM is emulated exactly: fp16 values held in fp32 storage, the fp32 kernel.
  bool fp16_gemm = false;
  // The tensors between ops (residual stream, logits and dlogits, activation and weight
  // gradients, the non-GEMM weights) in the GEMMs' 16-bit type, as llm.c keeps them on a GPU:
  // half the memory traffic of every elementwise kernel, one storage type per kernel. Each
  // residual add, gradient and weight read then rounds once more than on the CPU's fp32 stream.
  bool lowp_between_ops = false;
  // The GEMMs are cuBLASLt's on a GPU (the notes `mptrain explain` prints say so; the plan's
  // dtypes do not change).
  bool gpu_gemms = false;
  bool operator==(const BackendCaps&) const = default;
};

// The capabilities the CUDA backend has (tensor-core fp16 GEMMs, the 16-bit stream): the
// policy `--device cuda` runs, which `--policy-of cuda` also runs on the CPU backend.
constexpr BackendCaps kCudaCaps{.fp16_gemm = true, .lowp_between_ops = true, .gpu_gemms = true};

// The storage a GEMM of arithmetic `math` reads its operands in: bf16; fp16 where there are fp16
// GEMMs, else fp32 holding fp16 values; fp32 for fp32 and TF32 (rounded fp32 values).
inline StorageType operand_storage(ComputeType math, const BackendCaps& caps) {
  if (math == ComputeType::BF16) return StorageType::BF16;
  if (math == ComputeType::F16 && caps.fp16_gemm) return StorageType::F16;
  return StorageType::F32;
}

}  // namespace mptrain
