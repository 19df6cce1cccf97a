// The training precisions a run can ask for (--precision), and what each implies for
// storage. The per-op policy (which op computes and stores in which dtype) is built from
// this in precision/policy.h; this header only names the modes.
//
//   fp32  everything fp32 (GEMMs in full fp32, no tensor cores)
//   tf32  fp32 storage; GEMM inputs rounded to TF32 (10-bit mantissa), fp32 accumulation
//   bf16  autocast-style: GEMMs on bf16 copies of weights/activations, fp32 accumulation,
//         fp32 master weights, gradients and optimizer state; no loss scaler
//   fp16  as bf16 with fp16, plus dynamic loss scaling (precision/loss_scaler.h)
#pragma once
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/error.h"

namespace mptrain {

enum class Precision { Fp32, Tf32, Bf16, Fp16 };

inline const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32:
      return "fp32";
    case Precision::Tf32:
      return "tf32";
    case Precision::Bf16:
      return "bf16";
    case Precision::Fp16:
      return "fp16";
  }
  return "?";
}

// Throws Error naming the bad value and the accepted ones.
inline Precision parse_precision(std::string_view name) {
  for (Precision p : {Precision::Fp32, Precision::Tf32, Precision::Bf16, Precision::Fp16})
    if (name == precision_name(p)) return p;
  throw Error("unknown precision '" + std::string(name) + "' (expected fp32, tf32, bf16 or fp16)");
}

// fp16's narrow exponent range needs dynamic loss scaling; the others do not.
inline bool needs_loss_scaler(Precision p) { return p == Precision::Fp16; }

}  // namespace mptrain
