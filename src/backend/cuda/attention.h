// Multi-head self-attention on the GPU, materialising the T×T scores: the naive path (strided
// batched cuBLASLt products + softmax kernels). It is the ladder's "before" row for flash
// attention and the reference a fused kernel is tested against.
//
// The contract of backend/ops/attention.h (causal, under BERT's key padding mask, or packed) for one storage
// type T ∈ {float, Bf16, Fp16} used by qkv, out, dout, dqkv and the saved probabilities: qkv[B,T,3C] is
// c_attn's output (q | k | v per token, NH heads of HS = C/NH), out[B,T,C] has the heads concatenated, scale
// = 1/sqrt(HS). The arithmetic is cpu::attention_forward_typed's: products accumulate in fp32 (AttentionMath
// picks fp32 or TF32 when T is float: `scores` for Q·Kᵀ, dQ and dK, `values` for P·V, dP and dV, as the
// CPU assigns them), scores and the softmax are fp32, P is rounded to T once when saved, dS is T.
// Device pointers; asynchronous on ctx.stream(); capture-safe once each shape has run once.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"
#include "backend/cuda/gemm.h"
#include "core/dtype.h"

namespace mptrain::cuda {

// The arithmetic of the two products and their backward (AttentionDtypes' scores and values).
struct AttentionMath {
  ComputeType scores = ComputeType::F32, values = ComputeType::F32;
  AttentionMath() = default;
  AttentionMath(ComputeType both) : scores(both), values(both) {}  // NOLINT: one mode for both products
  AttentionMath(ComputeType s, ComputeType v) : scores(s), values(v) {}
};

// Which keys each query attends to: the three forms of backend/ops/attention.h, for this path and
// flash_attention.h's alike.
//   causal  key <= query.
//   masked  bidirectional under key_mask [B,T] (device ints; Hugging Face's attention_mask: nonzero
//           = a real key, 0 = padding; null = no padding). P is exactly 0 on padded keys; query rows
//           at padded positions are computed over the real keys, as PyTorch does. A row with no real
//           key gives NaN outputs (checking needs a host sync; the data layer never produces one).
//   packed  bidirectional over packed sequences (backend/backend.h's EmbeddingArgs): cu_seqlens
//           [B+1] device ints (0 first, increasing, each sequence 1..T rows; trusted, as the host
//           checked them); sequence b is rows [cu[b], cu[b+1]) of qkv, out, dout and dqkv, which
//           hold rows = cu[B] <= B·T rows, and attends to itself only. This path runs it as plain
//           kernels, one fp32 dot product per thread, with the same arithmetic (under TF32 each
//           product's operands are first rounded as the CPU's TF32 GEMMs round them); its saved P
//           is [rows, NH, T] (query row, head, key position in the sequence; 0 past its end).
struct AttentionKeys {
  enum class Form { Causal, Masked, Packed } form = Form::Causal;
  const int* key_mask = nullptr;
  const int* cu_seqlens = nullptr;
  int rows = 0;
  static AttentionKeys causal() { return {}; }
  static AttentionKeys masked(const int* key_mask) { return {Form::Masked, key_mask, nullptr, 0}; }
  static AttentionKeys packed(const int* cu_seqlens, int rows) {
    return {Form::Packed, nullptr, cu_seqlens, rows};
  }
};

// Bytes of the state forward saves for backward (P [B,NH,T,T] in t).
size_t attention_saved_bytes(int B, int T, int C, int NH, StorageType t);
// Bytes of device scratch forward and backward may use freely (not preserved between calls).
size_t attention_scratch_bytes(int B, int T, int C, int NH, StorageType t);
// The packed form's own (P; scores or dP in fp32, then dS): at most the two above for ⌈rows / T⌉
// sequences of T, the memory backend.h's AttentionArgs gives a packed batch.
size_t attention_packed_saved_bytes(int rows, int T, int NH, StorageType t);
size_t attention_packed_scratch_bytes(int rows, int T, int NH, StorageType t);

// out (=), saved (=). Causal, masked or packed as `keys` says (below).
template <class T>
void attention_forward(T* out, void* saved, const T* qkv, const AttentionKeys& keys, void* scratch, int B,
                       int Tn, int C, int NH, AttentionMath math, Context& ctx);
// dqkv[B,T,3C] (=). Reads the qkv and saved state forward used, under the same keys (the masked
// form needs no mask here: the saved P carries it, and its backward is the causal one's algorithm
// without the causal structure).
template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const void* saved, const AttentionKeys& keys,
                        void* scratch, int B, int Tn, int C, int NH, AttentionMath math, Context& ctx);

}  // namespace mptrain::cuda
