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
#include "core/named.h"

namespace mptrain {

enum class Precision { Fp32, Tf32, Bf16, Fp16 };

inline constexpr NameTable<Precision, 4> kPrecisionNames{
    {{Precision::Fp32, "fp32"}, {Precision::Tf32, "tf32"}, {Precision::Bf16, "bf16"}, {Precision::Fp16, "fp16"}}};
inline const char* precision_name(Precision p) { return name_in(kPrecisionNames, p); }
// Throws Error naming the bad value and the accepted ones.
inline Precision parse_precision(std::string_view name) { return parse_in(kPrecisionNames, name, "precision"); }

// fp16's narrow exponent range needs dynamic loss scaling; the others do not.
inline bool needs_loss_scaler(Precision p) { return p == Precision::Fp16; }

}  // namespace mptrain
