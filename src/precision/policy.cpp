// The per-op precision policy: the table, derived from a Precision and a few overrides.
#include "precision/policy.h"

#include <array>

#include "core/error.h"

namespace mptrain {

namespace {

constexpr std::array<const char*, kNumOpKinds> kOpNames = {
    "embedding", "layernorm", "linear", "attn_scores", "softmax",   "attn_values",  "gelu",
    "residual",  "lm_head",   "loss",   "grad_norm",   "optimizer", "newton_schulz"};

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

bool is_gemm(OpKind op) {
  return op == OpKind::Linear || op == OpKind::AttnScores || op == OpKind::AttnValues ||
         op == OpKind::LmHead || op == OpKind::NewtonSchulz;
}

// Why an fp32-only op refuses a lower precision (the autocast fp32 lists, and the numerics).
const char* fp32_reason(OpKind op) {
  switch (op) {
    case OpKind::LayerNorm:
      return "its mean and variance need fp32 (autocast's fp32 list); its output may be stored in the "
             "GEMM's dtype, which follows --op-precision linear=...";
    case OpKind::Softmax:
      return "exp and the row sum need fp32 (autocast forces softmax to fp32); the probabilities are stored "
             "in "
             "the P·V product's dtype, which follows --op-precision attn_values=...";
    case OpKind::Loss:
      return "log-softmax and the NLL sum over the vocabulary need fp32 (autocast's fp32 list)";
    case OpKind::GradNorm:
      return "the norm is a sum of squares over every gradient: fp32 master gradients, fp32 sum";
    case OpKind::Optimizer:
      return "updates go to the fp32 master weights and fp32 moments (small updates vanish in 16 bits)";
    case OpKind::Embedding:
      return "the residual stream starts here and stays fp32";
    case OpKind::Residual:
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

const char* op_name(OpKind op) { return kOpNames[static_cast<size_t>(op)]; }

bool Policy::all_fp32() const {
  for (const OpRule& r : rules)
    if (r.op != OpKind::NewtonSchulz &&
        (r.input != F32 || r.compute != ComputeType::F32 || r.output != F32 || r.saved != F32))
      return false;
  return true;
}

bool Policy::uses_fp16() const {
  for (const OpRule& r : rules)
    if (r.op != OpKind::NewtonSchulz && (r.input == StorageType::F16 || r.compute == ComputeType::F16 ||
                                         r.output == StorageType::F16 || r.saved == StorageType::F16))
      return true;
  return false;
}

StorageType Policy::operand(OpKind gemm) const {
  MPT_CHECK(is_gemm(gemm), std::string("[precision] ") + op_name(gemm) + " is not a GEMM");
  return operand_storage(rule(gemm).compute, caps);
}

Policy make_policy(Precision precision, const std::vector<OpOverride>& overrides, BackendCaps caps) {
  // The knobs: the compute type of each GEMM kind and GELU's dtype. Everything else follows.
  std::array<ComputeType, kNumOpKinds> forced{};
  std::array<bool, kNumOpKinds> is_forced{};
  for (const OpOverride& o : overrides) {
    const size_t k = static_cast<size_t>(o.op);
    const std::string msg =
        std::string("[precision] ") + op_name(o.op) + " cannot run in " + compute_name(o.dtype) + ": ";
    if (!is_gemm(o.op) && o.op != OpKind::Gelu && o.dtype != ComputeType::F32)
      throw Error(msg + fp32_reason(o.op));
    if (o.op == OpKind::Gelu && o.dtype == ComputeType::TF32)
      throw Error(msg + "TF32 is a GEMM compute mode, not a storage dtype (use fp32, bf16 or fp16)");
    forced[k] = o.dtype;
    is_forced[k] = true;
  }
  auto knob = [&](OpKind op, ComputeType dflt) {
    const size_t k = static_cast<size_t>(op);
    return is_forced[k] ? forced[k] : dflt;
  };
  const ComputeType gemm = gemm_compute(precision);
  const ComputeType lin = knob(OpKind::Linear, gemm);
  const ComputeType scores = knob(OpKind::AttnScores, gemm);
  const ComputeType values = knob(OpKind::AttnValues, gemm);
  const ComputeType head = knob(OpKind::LmHead, gemm);
  // GELU keeps its input's dtype under autocast (an unlisted op): the linear's output dtype.
  const ComputeType gelu = knob(OpKind::Gelu, lin == ComputeType::TF32 ? ComputeType::F32 : lin);
  const StorageType lin_s = compute_storage(lin), values_s = compute_storage(values),
                    gelu_s = compute_storage(gelu);
  const ComputeType f32 = ComputeType::F32;

  Policy p;
  p.precision = precision;
  p.caps = caps;
  p.rules.resize(kNumOpKinds);
  auto set = [&](OpRule r) { p.rules[static_cast<size_t>(r.op)] = std::move(r); };
  // A GPU's plan (caps.lowp_between_ops) keeps what flows between ops in the GEMMs' 16-bit type.
  const StorageType lowp = caps.lowp_between_ops ? lin_s : F32;
  const bool stream16 = lowp != F32;
  const std::string lowp_name = storage_name(lowp);
  set({OpKind::Embedding, F32, f32, F32, lowp, lowp, "its output x (LayerNorm backward reads it)",
       stream16
           ? "wte[token] + wpe[t] summed in fp32 from the " + lowp_name + " weight copies, written " +
                 lowp_name + ": the GPU's residual stream starts " + lowp_name + " (llm.c)"
           : "wte[token] + wpe[t] in fp32: the residual stream starts fp32 (autocast leaves embedding in its "
             "fp32 weights' dtype)"});
  set({OpKind::LayerNorm, lowp, f32, F32, lin_s, lin_s,
       "its output (the next GEMM's input) + mean, rstd fp32",
       std::string(
           "fp32 statistics (autocast fp32 list); the output is written once in the dtype of the GEMM "
           "that reads it (") +
           storage_name(lin_s) + "): autocast writes fp32 and the linear casts it, the same values"});
  set({OpKind::Linear, lin_s, lin, F32, lin_s, lin_s, "its output when backward reads it (qkv, c_fc out)",
       gemm_note(lin,
                 stream16 ? "c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj: out = x·W + b with the bias added in "
                            "fp32 before the output is rounded; dW, db are written 16-bit per micro-batch "
                            "and widened into the fp32 master gradients (llm.c)"
                          : "c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj: out = x·W + b with the bias added in "
                            "fp32 before the output is rounded; dW, db accumulate into fp32 master "
                            "gradients",
                 caps.gpu_gemms)});
  set({OpKind::AttnScores, lin_s, scores, F32, F32, F32, "",
       gemm_note(scores,
                 "Q·K^T on the heads of qkv, written fp32 for the fp32 softmax (autocast would round "
                 "them to the low precision first: one rounding fewer here)",
                 caps.gpu_gemms)});
  set({OpKind::Softmax, F32, f32, F32, values_s, values_s, "probabilities P [B,NH,T,T]",
       std::string("fp32 (as CUDA autocast; torch 1.13's CPU softmax stays bf16); P is written once in the "
                   "P·V product's dtype (") +
           storage_name(values_s) + ")"});
  set({OpKind::AttnValues, values_s, values, F32, values_s, values_s, "its output y (attn.c_proj's input)",
       gemm_note(values, "P·V per head; backward's dP = dY·V^T, dQ, dK, dV products also run in this dtype",
                 caps.gpu_gemms)});
  set({OpKind::Gelu, lin_s, f32, F32, gelu_s, gelu_s, "its output (mlp.c_proj's input)",
       "math in fp32 registers, one rounding on output (as ATen's CPU bf16 kernels); autocast keeps an "
       "unlisted op in its input's dtype"});
  set({OpKind::Residual, lowp, f32, F32, lowp, lowp, "its output (the next LayerNorm's backward reads it)",
       stream16
           ? "the GPU's residual stream is " + lowp_name +
                 ": each add sums in fp32 and rounds once (llm.c; half the memory traffic of an fp32 stream)"
           : std::string("the residual stream stays fp32; a low-precision linear output is widened on add "
                         "(fp32 + bf16 -> fp32)")});
  set({OpKind::LmHead, lin_s, head, F32, lowp, lowp, "",
       gemm_note(head,
                 stream16 ? "logits = lnf·wte^T over the padded vocabulary, kept in the GPU's 16-bit type "
                            "(autocast's choice too); the fused cross-entropy reads them in fp32 and "
                            "writes dlogits in place, one rounding"
                          : "logits = lnf·wte^T over the padded vocabulary. Logits are kept fp32 (autocast: "
                            "bf16) because the fused cross-entropy reads fp32 and writes dlogits in "
                            "place; the backward GEMMs read dlogits rounded to this dtype",
                 caps.gpu_gemms)});
  set({OpKind::Loss, lowp, f32, F32, F32, F32, "", "fused log-softmax + NLL in fp32 (autocast fp32 list)"});
  set({OpKind::GradNorm, F32, f32, F32, F32, F32, "", "fp32 sum of squares over the fp32 master gradients"});
  set({OpKind::Optimizer, F32, f32, F32, F32, F32, "",
       "AdamW on fp32 master weights with two fp32 moments; the GEMM weight copies are refreshed from the "
       "master weights once per step (before the next forward)"});
  // Muon's Newton–Schulz iteration multiplies in bf16 under both mixed precisions (its recipe's
  // arithmetic: the iteration maps singular values into [0.7, 1.2], so bf16's 8-bit mantissa is
  // enough and fp16's range buys nothing), in the run's own GEMM arithmetic under fp32 and TF32.
  const ComputeType ns = knob(OpKind::NewtonSchulz, gemm == ComputeType::F16 ? ComputeType::BF16 : gemm);
  set({OpKind::NewtonSchulz, F32, ns, F32, F32, F32, "",
       gemm_note(ns,
                 "Muon only: each hidden matrix's momentum, normalised, through 5 quintic Newton–Schulz "
                 "steps (X·X^T, A·A, B·X); the orthogonalised update is applied to the fp32 master weights",
                 caps.gpu_gemms)});
  // Between the ops: the residual stream is what the residual adds write, the logits what the
  // LM head writes; the loss writes dlogits straight in the LM head backward's operand storage
  // (one rounding, no fp32 pass). On the CPU gradients flow in fp32, dW and db accumulate into
  // the fp32 master gradients and non-GEMM weights are read from the fp32 masters; a GPU's plan
  // keeps all of them 16-bit (dW, db widened into the fp32 master gradients once per range).
  p.residual_stream = p.rule(OpKind::Residual).output;
  p.logits = p.rule(OpKind::LmHead).output;
  p.dlogits = p.operand(OpKind::LmHead);
  p.activation_grads = lowp;
  p.weight_grads = lowp;
  p.small_weights = lowp;
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
      for (int k = 0; k < kNumOpKinds; ++k)
        if (op == kOpNames[k]) found = k;
      if (found < 0) {
        std::string names;
        for (const char* n : kOpNames) names += std::string(names.empty() ? "" : ", ") + n;
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
      out.push_back({static_cast<OpKind>(found), t});
      if (end == spec.size()) break;
    }
  }
  return out;
}

}  // namespace mptrain
