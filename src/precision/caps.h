// What a backend can compute, as the precision policy needs to know it (make_policy's BackendCaps),
// and the one rule that follows from it for every GEMM: the storage its operands are read in. The
// policy (Policy::operand), the backends (Backend::operand_storage) and the CPU's GEMM workspace
// all ask this one function, so the answer cannot differ between them.
#pragma once
#include <string_view>

#include "core/dtype.h"
#include "core/named.h"

namespace mptrain {

struct BackendCaps {
  // fp16 GEMM kernels (oneDNN's where the CPU has AVX512-FP16; tensor cores on a GPU). Without
  // them an fp16 GEMM is emulated exactly: fp16 values held in fp32 storage, the fp32 kernel.
  bool fp16_gemm = false;
  // The tensors between ops (residual stream, logits and dlogits, activation and weight
  // gradients, the non-GEMM weights) in the GEMMs' 16-bit type, as llm.c keeps them on a GPU:
  // half the memory traffic of every elementwise kernel, one storage type per kernel. Each
  // residual add, gradient and weight read then rounds once more than on the CPU's fp32 stream.
  // Under this plan GELU's derivative also goes into the down projection's dx product, where
  // cuBLASLt's DGELU epilogue computes it (model/gpt2_pass.cpp).
  bool lowp_between_ops = false;
  // The GEMMs are cuBLASLt's on a GPU (the notes `mptrain explain` prints say so; the plan's
  // dtypes do not change: what a GPU's plan does differently follows lowp_between_ops).
  bool gpu_gemms = false;
  bool operator==(const BackendCaps&) const = default;
};

// The capabilities the CUDA backend has (tensor-core fp16 GEMMs, the 16-bit stream): the
// policy `--device cuda` runs, whose dtypes `--policy-of cuda` runs on the CPU backend.
constexpr BackendCaps kCudaCaps{.fp16_gemm = true, .lowp_between_ops = true, .gpu_gemms = true};

// Whose precision plan a run follows (--policy-of): its own backend's; the CPU's (named, so that a
// resumed run leaves a checkpoint's GPU plan); or the GPU's, run on the CPU (how CI checks the
// GPU's dtypes without a GPU).
enum class PolicyOf { Own, Cpu, Cuda };
inline constexpr NameTable<PolicyOf, 2> kPolicyOfNames{{{PolicyOf::Cpu, "cpu"}, {PolicyOf::Cuda, "cuda"}}};
inline PolicyOf parse_policy_of(std::string_view name) { return parse_in(kPolicyOfNames, name, "--policy-of"); }

// The GPU's plan as the CPU runs it (--policy-of cuda): the CUDA backend's dtypes (the 16-bit
// stream, fp16 GEMM operands, GELU's derivative in the dx product), multiplied by this CPU's GEMMs
// (so the notes `mptrain explain` prints name oneDNN).
constexpr BackendCaps kCudaPlanOnCpu{.fp16_gemm = true, .lowp_between_ops = true, .gpu_gemms = false};
// The capabilities a plan is made for: the backend's own, or the GPU's under --policy-of cuda.
inline BackendCaps plan_caps(PolicyOf of, const BackendCaps& own) {
  return of == PolicyOf::Cuda ? kCudaPlanOnCpu : own;
}

// The storage a GEMM of arithmetic `math` reads its operands in: bf16; fp16 where there are fp16
// GEMMs, else fp32 holding fp16 values; fp32 for fp32 and TF32 (rounded fp32 values).
inline StorageType operand_storage(ComputeType math, const BackendCaps& caps) {
  if (math == ComputeType::BF16) return StorageType::BF16;
  if (math == ComputeType::F16 && caps.fp16_gemm) return StorageType::F16;
  return StorageType::F32;
}

}  // namespace mptrain
