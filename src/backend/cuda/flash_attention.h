// Fused ("flash") multi-head self-attention on the GPU: the T×T scores and probabilities never
// reach global memory. Forward saves only the output and the log-sum-exp of each query row;
// backward recomputes the probabilities tile by tile from it (FlashAttention-2's scheme, with dQ
// in a second pass so that no float atomics are needed and repeated runs are bit-identical).
//
// Same contract as the naive path in attention.h (which is the reference and the ladder's
// "before" row): qkv[B,T,3C] is c_attn's output (q | k | v per token, NH heads of HS = C/NH),
// out[B,T,C] has the heads concatenated, scale = 1/sqrt(HS); the keys of attention.h's
// AttentionKeys (causal, under a key padding mask, or over packed sequences). Storage T ∈ {Bf16, Fp16}:
// tensor-core products (mma.sync m16n8k16) with fp32 accumulation, fp32 online softmax, P and dS rounded to T
// once as product operands. T = float is refused with an Error (use attention.h). HS ∈ {64, 128};
// C must be a multiple of 8 and every T pointer 16-byte aligned (16-byte row loads). Saved state:
// lse[B,NH,T] fp32 (packed: [rows, NH], below), the natural log of Σ_j exp(scale·s_ij) over the
// keys row i attends to. Device pointers; asynchronous on ctx.stream(); capture-safe (no
// allocation, no sync).
#pragma once
#include <cstddef>

#include "backend/cuda/attention.h"
#include "backend/cuda/context.h"
#include "core/dtype.h"

namespace mptrain::cuda {

// Whether the fused kernels take this shape and type (HS = C/NH ∈ {64, 128}, 16-bit T); a caller
// falls back to attention.h where they do not. Never throws.
bool flash_attention_supported(int C, int NH, StorageType t);

// Bytes of the state forward saves for backward: lse [B,NH,T] fp32 (packed: [rows, NH], so these
// bytes for any B with B·T >= rows suffice, however many sequences the packing has).
size_t flash_attention_saved_bytes(int B, int T, int NH);
// Bytes of device scratch backward uses (D = rowsum(dO ⊙ O), laid out as lse); forward uses none.
size_t flash_attention_scratch_bytes(int B, int T, int NH);

// out (=), lse (=); causal, masked or packed as `keys` says (attention.h). Packed: lse (and the
// backward's D) are [rows, NH], entry row·NH + h.
template <class T>
void flash_attention_forward(T* out, float* lse, const T* qkv, const AttentionKeys& keys, int B, int Tn,
                             int C, int NH, Context& ctx);
// dqkv[B,T,3C] (=), must not overlap the inputs. Reads the qkv, out and lse of the forward, under
// the same keys (the masked form with the same key_mask).
template <class T>
void flash_attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse,
                              const AttentionKeys& keys, void* scratch, int B, int Tn, int C, int NH,
                              Context& ctx);

}  // namespace mptrain::cuda
