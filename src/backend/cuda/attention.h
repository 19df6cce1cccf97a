// Multi-head self-attention on the GPU, materialising the T×T scores: the naive path (strided
// batched cuBLASLt products + softmax kernels). It is the ladder's "before" row for flash
// attention and the reference a fused kernel is tested against.
//
// The contract of backend/ops/attention.h (causal, and under BERT's key padding mask) for one storage type T
// ∈ {float, Bf16, Fp16} used by qkv, out, dout, dqkv and the saved probabilities: qkv[B,T,3C] is c_attn's
// output (q | k | v per token, NH heads of HS = C/NH), out[B,T,C] has the heads concatenated, scale =
// 1/sqrt(HS). The arithmetic is cpu::attention_forward_typed's: products accumulate in fp32 (AttentionMath
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

// Bytes of the state forward saves for backward (P [B,NH,T,T] in t).
size_t attention_saved_bytes(int B, int T, int C, int NH, StorageType t);
// Bytes of device scratch forward and backward may use freely (not preserved between calls).
size_t attention_scratch_bytes(int B, int T, int C, int NH, StorageType t);

// Causal. out (=).
template <class T>
void attention_forward(T* out, void* saved, const T* qkv, void* scratch, int B, int Tn, int C, int NH,
                       AttentionMath math, Context& ctx);
// dqkv[B,T,3C] (=). Reads the qkv and saved state forward used.
template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const void* saved, void* scratch, int B, int Tn,
                        int C, int NH, AttentionMath math, Context& ctx);

// Bidirectional under key_mask[B,T] (device ints; Hugging Face's attention_mask: nonzero = a real
// key, 0 = padding; null = no padding). P is exactly 0 on padded keys; query rows at padded
// positions are computed over the real keys, as PyTorch does. A row with no real key gives NaN
// outputs (checking needs a host sync; the data layer never produces one). The backward needs no
// mask: it is attention_backward's algorithm without the causal structure.
template <class T>
void attention_masked_forward(T* out, void* saved, const T* qkv, const int* key_mask, void* scratch, int B,
                              int Tn, int C, int NH, AttentionMath math, Context& ctx);
template <class T>
void attention_masked_backward(T* dqkv, const T* dout, const T* qkv, const void* saved, void* scratch, int B,
                               int Tn, int C, int NH, AttentionMath math, Context& ctx);

}  // namespace mptrain::cuda
