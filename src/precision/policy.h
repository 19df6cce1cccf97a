// The per-op precision policy, as data: for every kind of op in the model, the dtype it
// reads, computes in, accumulates in, writes, and keeps for backward, per Precision.
//
// The rules follow PyTorch autocast (aten/src/ATen/autocast_mode.cpp, docs amp.rst):
//   * GEMM-like ops (the linear layers, attention's Q·K^T and P·V, the LM head) multiply in
//     the low precision and accumulate in fp32; their output is the low precision.
//   * LayerNorm, softmax, the loss, reductions and norms compute in fp32.
//   * The residual stream is fp32 (fp32 + bf16 promotes to fp32).
//   * Parameters, gradients and optimizer state are fp32 master copies; each GEMM weight has
//     a low-precision copy refreshed once per optimizer step (autocast's weight-cast cache).
// Deviations from autocast, on purpose, are in each rule's note (e.g. logits stay fp32
// because the fused cross-entropy reads fp32 and writes dlogits in place).
//
// The table has one rule per precision role (precision/op_role.h), and every op of the interface
// names its roles (backend/op_list.h), so every op has its rule. The models (model/gpt2.cpp,
// bert.cpp, llama.cpp) read it to choose every activation's storage dtype and every GEMM's operand
// format; `mptrain explain` prints the rows of the roles a model uses. Nothing else decides dtypes.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "precision/caps.h"
#include "precision/op_role.h"
#include "precision/precision.h"

namespace mptrain {

// The rule of one precision role (precision/op_role.h: the roles backend/op_list.h gives each op).
struct OpRule {
  OpRole op;
  StorageType input;       // dtype of the activation it reads
  ComputeType compute;     // dtype of its multiplies / elementwise math
  StorageType accumulate;  // dtype of its sums (fp32 everywhere)
  StorageType output;      // dtype it writes
  StorageType saved;       // dtype of what it keeps for backward (its output or input, see saves)
  const char* saves;       // what it keeps for backward, in words ("" when nothing)
  std::string note;        // why, where it differs from autocast, CPU emulation
};

// One role's dtype forced by --op-precision role=dtype.
struct OpOverride {
  OpRole op;
  ComputeType dtype;
};

struct Policy {
  Precision precision = Precision::Fp32;
  std::vector<OpRule> rules;  // indexed by OpRole, one a role
  StorageType master_weights = StorageType::F32;
  StorageType gradients = StorageType::F32;
  StorageType optimizer_state = StorageType::F32;
  // Each GEMM weight is read through a copy in the compute type of the op that reads it
  // (rule(Linear).compute for the block weights, rule(LmHead).compute for wte), refreshed once
  // per optimizer step; fp32 GEMMs read the master weights and need no copy.

  // The backend the dtypes below were chosen for.
  BackendCaps caps;
  // The tensors between ops, which no single rule owns. The CPU's plan keeps them all fp32
  // except dlogits; with caps.lowp_between_ops (a GPU's plan) they are the GEMMs' 16-bit type.
  StorageType residual_stream = StorageType::F32;   // embedding output, residual adds, LayerNorm inputs
  StorageType logits = StorageType::F32;            // the LM head's output, which the fused loss reads
  StorageType dlogits = StorageType::F32;           // what the loss writes for the LM head's backward GEMMs
  StorageType activation_grads = StorageType::F32;  // gradients between ops (dresidual, LayerNorm's dinp)
  StorageType weight_grads = StorageType::F32;      // the dtype dW and db are computed in, before the fp32
                                                    // master gradients (fp32: accumulated there directly)
  StorageType small_weights = StorageType::F32;     // how non-GEMM weights are read: LayerNorm gains and
                                                    // biases, linear biases, the position embeddings

  const OpRule& rule(OpRole op) const { return rules[static_cast<size_t>(op)]; }
  // The storage a GEMM op (Linear, AttnScores, AttnValues, LmHead, NewtonSchulz) reads its operands in: its
  // compute type's storage, except TF32 (fp32 storage, rounded values) and fp16 without fp16
  // GEMMs in caps (fp16 values held in fp32). Weight copies and converted-once gradients use it.
  StorageType operand(OpRole gemm) const;
  // True when every rule of the model is plain fp32 (the optimizer's Newton–Schulz GEMMs aside):
  // the model then reads its fp32 master weights, with no GEMM weight copies.
  bool all_fp32() const;
  // True when any op of the model stores or computes in fp16 (dynamic loss scaling is then needed).
  bool uses_fp16() const;
};

// The policy for a precision on a backend with `caps`, with optional per-op overrides applied
// before the dependent dtypes are derived (e.g. linear=fp32 also makes LayerNorm write fp32,
// since its output is the linear's input). Throws Error "[precision] <op> cannot run in
// <dtype>: <reason>" for an override the op cannot honour (layernorm=fp16, softmax=bf16,
// loss=bf16, gelu=tf32, ...).
Policy make_policy(Precision precision, const std::vector<OpOverride>& overrides = {}, BackendCaps caps = {});

// Parses "gelu=bf16" or "gelu=bf16,linear=fp32" (also several strings, one per flag use).
// Throws Error on syntax, an unknown op or an unknown dtype. Validity for the op is checked
// by make_policy.
std::vector<OpOverride> parse_op_precision(const std::vector<std::string>& specs);

}  // namespace mptrain
