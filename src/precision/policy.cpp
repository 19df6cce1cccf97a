// The per-op precision policy: the table, derived from a Precision and a few overrides.
#include "precision/policy.h"

#include <array>

#include "core/error.h"

namespace mptrain {

namespace {

constexpr std::array<const char*, kNumOpRoles> kRoleNames = {
#define MPTRAIN_ROLE_NAME(e, name) name,
    MPTRAIN_OP_ROLES(MPTRAIN_ROLE_NAME)
#undef MPTRAIN_ROLE_NAME
};

constexpr StorageType F32 = StorageType::F32;

// The GEMM compute type a precision implies.
ComputeType gemm_compute(Precision p) {
  switch (p) {
    case Precision::Tf32:
      return ComputeType::TF32;
    case Precision::Bf16:
      return ComputeType::BF16;
    case Precision::Fp16:
      return ComputeType::F16;
    case Precision::Fp32:
      break;
  }
  return ComputeType::F32;
}

bool is_gemm(OpRole op) {
  return op == OpRole::Linear || op == OpRole::AttnScores || op == OpRole::AttnValues ||
         op == OpRole::LmHead || op == OpRole::NewtonSchulz;
}

// The elementwise activations between a block's two MLP linears: a dtype of their own to choose.
bool is_activation(OpRole op) { return op == OpRole::Gelu || op == OpRole::Swiglu || op == OpRole::Relu2; }

// Why an fp32-only op refuses a lower precision (the autocast fp32 lists, and the numerics).
const char* fp32_reason(OpRole op) {
  switch (op) {
    case OpRole::LayerNorm:
      return "its mean and variance need fp32 (autocast's fp32 list); its output may be stored in the "
             "GEMM's dtype, which follows --op-precision linear=...";
    case OpRole::RmsNorm:
      return "its mean square needs fp32 (autocast's fp32 list); its output may be stored in the GEMM's "
             "dtype, which follows --op-precision linear=...";
    case OpRole::Rope:
      return "it turns q and k in place in the dtype of the linear that wrote them, which follows "
             "--op-precision linear=...";
    case OpRole::Copy:
      return "a copy takes the dtypes of the rules on either side of it";
    case OpRole::Softmax:
      return "exp and the row sum need fp32 (autocast forces softmax to fp32); the probabilities are stored "
             "in "
             "the P·V product's dtype, which follows --op-precision attn_values=...";
    case OpRole::Loss:
      return "log-softmax and the NLL sum over the vocabulary need fp32 (autocast's fp32 list)";
    case OpRole::GradNorm:
      return "the norm is a sum of squares over every gradient: fp32 master gradients, fp32 sum";
    case OpRole::Optimizer:
      return "updates go to the fp32 master weights and fp32 moments (small updates vanish in 16 bits)";
    case OpRole::Embedding:
      return "the residual stream starts here and stays fp32";
    case OpRole::Residual:
      return "the residual stream stays fp32 (fp32 + bf16 promotes to fp32)";
    default:
      return "";
  }
}

std::string gemm_note(ComputeType c, const char* what, bool gpu) {
  std::string s = what;
  if (gpu) {  // cuBLASLt (backend/cuda/gemm.cpp)
    switch (c) {
      case ComputeType::F32:
        return s + "; full fp32 products (cuBLASLt, CUBLAS_COMPUTE_32F)";
      case ComputeType::TF32:
        return s +
               "; TF32 tensor cores (cuBLASLt, CUBLAS_COMPUTE_32F_FAST_TF32): fp32 operands rounded to a "
               "10-bit mantissa inside the GEMM, fp32 accumulation";
      case ComputeType::BF16:
        return s + "; bf16 operands, fp32 accumulation (cuBLASLt on tensor cores)";
      case ComputeType::F16:
        return s +
               "; fp16 operands, fp32 accumulation (cuBLASLt on tensor cores). Values beyond 65504 become "
               "inf "
               "(the loss scaler handles gradient overflow)";
    }
    return s;
  }
  switch (c) {
    case ComputeType::F32:
      return s + "; full fp32 products";
    case ComputeType::TF32:
      return s +
             "; CPU emulation of TF32: operands rounded to a 10-bit mantissa (weights once per step, "
             "activations before each GEMM), then the fp32 GEMM (a GPU does this in its tensor cores)";
    case ComputeType::BF16:
      return s + "; bf16 operands, fp32 accumulation (oneDNN AVX512-BF16/AMX kernels)";
    case ComputeType::F16:
      return s +
             "; fp16 operands, fp32 accumulation; on a CPU without AVX512-FP16 (no oneDNN fp16 GEMM) "
             "the operands are widened to fp32 and the fp32 GEMM runs: exact, since a product of two "
             "fp16 values is exact in fp32. Values beyond 65504 become inf (the loss scaler handles "
             "gradient overflow)";
  }
  return s;
}

}  // namespace

const char* role_name(OpRole op) { return kRoleNames[static_cast<size_t>(op)]; }

bool Policy::all_fp32() const {
  for (const OpRule& r : rules)
    if (r.op != OpRole::NewtonSchulz &&
        (r.input != F32 || r.compute != ComputeType::F32 || r.output != F32 || r.saved != F32))
      return false;
  return true;
}

bool Policy::uses_fp16() const {
  for (const OpRule& r : rules)
    if (r.op != OpRole::NewtonSchulz && (r.input == StorageType::F16 || r.compute == ComputeType::F16 ||
                                         r.output == StorageType::F16 || r.saved == StorageType::F16))
      return true;
  return false;
}

StorageType Policy::operand(OpRole gemm) const {
  MPT_CHECK(is_gemm(gemm), std::string("[precision] ") + role_name(gemm) + " is not a GEMM");
  return operand_storage(rule(gemm).compute, caps);
}

namespace {

// What every rule is derived from: the compute type of each knob (the GEMMs' and the activations',
// the defaults or --op-precision's), their storage, and the plan's stream.
struct Knobs {
  ComputeType lin, scores, values, head, ns, gelu, swiglu, relu2;
  StorageType lin_s, values_s;
  StorageType lowp;  // what flows between ops: fp32, or (a GPU's plan) the GEMMs' 16-bit type
  bool gpu_gemms;
  bool stream16() const { return lowp != F32; }
};

// An activation between the MLP's two linears: math in fp32 registers, one rounding on output,
// in its input's dtype by default (autocast keeps an unlisted op in its input's dtype).
OpRule activation_rule(OpRole op, ComputeType c, const Knobs& k, const char* saves, const char* what) {
  const StorageType s = compute_storage(c);
  return {op, k.lin_s, ComputeType::F32, F32, s, s, saves,
          std::string(what) +
              "math in fp32 registers, one rounding on output (as ATen's CPU bf16 kernels); autocast keeps an "
              "unlisted op in its input's dtype"};
}

// The rule of one role. Every role is a case (no default): a role without a rule does not compile.
OpRule rule_of(OpRole op, const Knobs& k) {
  const ComputeType f32 = ComputeType::F32;
  const StorageType lin_s = k.lin_s, values_s = k.values_s, lowp = k.lowp;
  const bool stream16 = k.stream16();
  const std::string lowp_name = storage_name(lowp);
  switch (op) {
    case OpRole::Embedding:
      return {op, F32, f32, F32, lowp, lowp, "its output x (LayerNorm backward reads it)",
              stream16 ? "wte[token] + wpe[t] summed in fp32 from the " + lowp_name + " weight copies, written " +
                             lowp_name + ": the GPU's residual stream starts " + lowp_name + " (llm.c)"
                       : "wte[token] + wpe[t] in fp32: the residual stream starts fp32 (autocast leaves embedding in "
                         "its fp32 weights' dtype)"};
    case OpRole::LayerNorm:
      return {op, lowp, f32, F32, lin_s, lin_s, "its output (the next GEMM's input) + mean, rstd fp32",
              std::string("fp32 statistics (autocast fp32 list); the output is written once in the dtype of the "
                          "GEMM that reads it (") +
                  storage_name(lin_s) + "): autocast writes fp32 and the linear casts it, the same values"};
    case OpRole::RmsNorm:
      return {op, lowp, f32, F32, lin_s, lin_s, "its output (the next GEMM's input) + rstd fp32",
              std::string("RMSNorm (no mean, no bias): fp32 statistics (autocast fp32 list); the output is "
                          "written once in the dtype of the GEMM that reads it (") +
                  storage_name(lin_s) + ")"};
    case OpRole::Linear:
      return {op, lin_s, k.lin, F32, lin_s, lin_s, "its output when backward reads it (qkv, c_fc out)",
              gemm_note(k.lin,
                        stream16 ? "c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj: out = x·W + b with the bias added "
                                   "in fp32 before the output is rounded; dW, db are written 16-bit per "
                                   "micro-batch and widened into the fp32 master gradients (llm.c)"
                                 : "c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj: out = x·W + b with the bias added "
                                   "in fp32 before the output is rounded; dW, db accumulate into fp32 master "
                                   "gradients",
                        k.gpu_gemms)};
    case OpRole::Rope:
      return {op, lin_s, f32, F32, lin_s, lin_s, "",
              std::string("rotary embeddings turn q and k in place in the linear's dtype (") +
                  storage_name(lin_s) +
                  "): angles and products in fp32, one rounding; the backward turns the gradient back, so "
                  "nothing is kept"};
    case OpRole::AttnScores:
      return {op, lin_s, k.scores, F32, F32, F32, "",
              gemm_note(k.scores,
                        "Q·K^T on the heads of qkv, written fp32 for the fp32 softmax (autocast would round "
                        "them to the low precision first: one rounding fewer here)",
                        k.gpu_gemms)};
    case OpRole::Softmax:
      return {op, F32, f32, F32, values_s, values_s, "probabilities P [B,NH,T,T]",
              std::string("fp32 (as CUDA autocast; torch 1.13's CPU softmax stays bf16); P is written once in "
                          "the P·V product's dtype (") +
                  storage_name(values_s) + ")"};
    case OpRole::AttnValues:
      return {op, values_s, k.values, F32, values_s, values_s, "its output y (attn.c_proj's input)",
              gemm_note(k.values,
                        "P·V per head; backward's dP = dY·V^T, dQ, dK, dV products also run in this dtype",
                        k.gpu_gemms)};
    case OpRole::Gelu:
      return activation_rule(op, k.gelu, k, "its output (mlp.c_proj's input)", "");
    case OpRole::Swiglu:
      return activation_rule(op, k.swiglu, k, "its output (down_proj's input)",
                             "silu(gate)·up from the gate|up linear's output (kept by that linear); ");
    case OpRole::Relu2:
      return activation_rule(op, k.relu2, k, "its output (down_proj's input)",
                             "relu(x)² of the up linear's output (kept by that linear); ");
    case OpRole::Residual:
      return {op, lowp, f32, F32, lowp, lowp, "its output (the next LayerNorm's backward reads it)",
              stream16 ? "the GPU's residual stream is " + lowp_name +
                             ": each add sums in fp32 and rounds once (llm.c; half the memory traffic of an fp32 "
                             "stream)"
                       : std::string("the residual stream stays fp32; a low-precision linear output is widened on "
                                     "add (fp32 + bf16 -> fp32)")};
    case OpRole::LmHead:
      return {op, lin_s, k.head, F32, lowp, lowp, "",
              gemm_note(k.head,
                        stream16 ? "logits = lnf·wte^T over the padded vocabulary, kept in the GPU's 16-bit type "
                                   "(autocast's choice too); the fused cross-entropy reads them in fp32 and "
                                   "writes dlogits in place, one rounding"
                                 : "logits = lnf·wte^T over the padded vocabulary. Logits are kept fp32 (autocast: "
                                   "bf16) because the fused cross-entropy reads fp32 and writes dlogits in "
                                   "place; the backward GEMMs read dlogits rounded to this dtype",
                        k.gpu_gemms)};
    case OpRole::Loss:
      return {op, lowp, f32, F32, F32, F32, "", "fused log-softmax + NLL in fp32 (autocast fp32 list)"};
    case OpRole::GradNorm:
      return {op, F32, f32, F32, F32, F32, "", "fp32 sum of squares over the fp32 master gradients"};
    case OpRole::Optimizer:
      return {op, F32, f32, F32, F32, F32, "",
              "AdamW on fp32 master weights with two fp32 moments; the GEMM weight copies are refreshed from the "
              "master weights once per step (before the next forward)"};
    case OpRole::NewtonSchulz:
      return {op, F32, k.ns, F32, F32, F32, "",
              gemm_note(k.ns,
                        "Muon only: each hidden matrix's momentum, normalised, through 5 quintic Newton–Schulz "
                        "steps (X·X^T, A·A, B·X); the orthogonalised update is applied to the fp32 master "
                        "weights",
                        k.gpu_gemms)};
    case OpRole::Copy:
      return {op, F32, f32, F32, lin_s, lin_s, "",
              "casts, GEMM weight copies, gathered and scattered rows, widened gradients: exact widening, or "
              "one round to nearest even into the dtype the reading op's rule chose"};
  }
  throw Error("[precision] no rule for a role");  // unreachable: every role is a case
}

}  // namespace

Policy make_policy(Precision precision, const std::vector<OpOverride>& overrides, BackendCaps caps) {
  // The knobs: the compute type of each GEMM role and each activation's dtype. Everything else
  // follows.
  std::array<ComputeType, kNumOpRoles> forced{};
  std::array<bool, kNumOpRoles> is_forced{};
  for (const OpOverride& o : overrides) {
    const size_t k = static_cast<size_t>(o.op);
    const std::string msg =
        std::string("[precision] ") + role_name(o.op) + " cannot run in " + compute_name(o.dtype) + ": ";
    if (!is_gemm(o.op) && !is_activation(o.op) && o.dtype != ComputeType::F32)
      throw Error(msg + fp32_reason(o.op));
    if (is_activation(o.op) && o.dtype == ComputeType::TF32)
      throw Error(msg + "TF32 is a GEMM compute mode, not a storage dtype (use fp32, bf16 or fp16)");
    forced[k] = o.dtype;
    is_forced[k] = true;
  }
  auto knob = [&](OpRole op, ComputeType dflt) {
    const size_t k = static_cast<size_t>(op);
    return is_forced[k] ? forced[k] : dflt;
  };
  const ComputeType gemm = gemm_compute(precision);
  Knobs k{};
  k.lin = knob(OpRole::Linear, gemm);
  k.scores = knob(OpRole::AttnScores, gemm);
  k.values = knob(OpRole::AttnValues, gemm);
  k.head = knob(OpRole::LmHead, gemm);
  // The activations keep their input's dtype under autocast (unlisted ops): the linear's output's.
  const ComputeType act = k.lin == ComputeType::TF32 ? ComputeType::F32 : k.lin;
  k.gelu = knob(OpRole::Gelu, act);
  k.swiglu = knob(OpRole::Swiglu, act);
  k.relu2 = knob(OpRole::Relu2, act);
  // Muon's Newton–Schulz iteration multiplies in bf16 under both mixed precisions (its recipe's
  // arithmetic: the iteration maps singular values into [0.7, 1.2], so bf16's 8-bit mantissa is
  // enough and fp16's range buys nothing), in the run's own GEMM arithmetic under fp32 and TF32.
  k.ns = knob(OpRole::NewtonSchulz, gemm == ComputeType::F16 ? ComputeType::BF16 : gemm);
  k.lin_s = compute_storage(k.lin);
  k.values_s = compute_storage(k.values);
  // A GPU's plan (caps.lowp_between_ops) keeps what flows between ops in the GEMMs' 16-bit type.
  k.lowp = caps.lowp_between_ops ? k.lin_s : F32;
  k.gpu_gemms = caps.gpu_gemms;

  Policy p;
  p.precision = precision;
  p.caps = caps;
  for (int r = 0; r < kNumOpRoles; ++r) p.rules.push_back(rule_of(static_cast<OpRole>(r), k));
  // Between the ops: the residual stream is what the residual adds write, the logits what the
  // LM head writes; the loss writes dlogits straight in the LM head backward's operand storage
  // (one rounding, no fp32 pass). On the CPU gradients flow in fp32, dW and db accumulate into
  // the fp32 master gradients and non-GEMM weights are read from the fp32 masters; a GPU's plan
  // keeps all of them 16-bit (dW, db widened into the fp32 master gradients once per range).
  p.residual_stream = p.rule(OpRole::Residual).output;
  p.logits = p.rule(OpRole::LmHead).output;
  p.dlogits = p.operand(OpRole::LmHead);
  p.activation_grads = k.lowp;
  p.weight_grads = k.lowp;
  p.small_weights = k.lowp;
  return p;
}

std::vector<OpOverride> parse_op_precision(const std::vector<std::string>& specs) {
  std::vector<OpOverride> out;
  for (const std::string& spec : specs) {
    size_t start = 0;
    while (start <= spec.size()) {
      size_t end = spec.find(',', start);
      if (end == std::string::npos) end = spec.size();
      const std::string item = spec.substr(start, end - start);
      start = end + 1;
      if (item.empty()) {
        if (end == spec.size()) break;
        continue;
      }
      const size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
        throw Error("[precision] --op-precision expects op=dtype (e.g. gelu=bf16), got '" + item + "'");
      const std::string op = item.substr(0, eq), dtype = item.substr(eq + 1);
      int found = -1;
      for (int k = 0; k < kNumOpRoles; ++k)
        if (op == kRoleNames[k]) found = k;
      if (found < 0) {
        std::string names;
        for (const char* n : kRoleNames) names += std::string(names.empty() ? "" : ", ") + n;
        throw Error("[precision] unknown op '" + op + "' in --op-precision (ops: " + names + ")");
      }
      ComputeType t;
      if (dtype == "fp32")
        t = ComputeType::F32;
      else if (dtype == "tf32")
        t = ComputeType::TF32;
      else if (dtype == "bf16")
        t = ComputeType::BF16;
      else if (dtype == "fp16")
        t = ComputeType::F16;
      else
        throw Error("[precision] unknown dtype '" + dtype + "' for " + op +
                    " (expected fp32, tf32, bf16 or fp16)");
      out.push_back({static_cast<OpRole>(found), t});
      if (end == spec.size()) break;
    }
  }
  return out;
}

}  // namespace mptrain
