// The naive GPU attention over packed sequences: attention.h's AttentionKeys::packed form, what
// the CUDA backend runs for a packed BERT batch where flash attention does not (fp32 storage, a
// head size other than 64 or 128, flash turned off). Sequences of different lengths are no strided
// batch of equal GEMMs, so these are plain kernels, one fp32 dot product per thread; the fast path
// is flash_attention.h's packed form. attention.h's attention_forward and attention_backward call
// these for that form; NH heads of HS = C/NH, scale 1/sqrt(HS). The arithmetic is attention.h's step for step
// (and so cpu::attention_forward_typed's): unscaled fp32 scores, softmax of scale·(s - max) in fp32, P
// rounded to T once when saved, dS = scale·P·(dP - Σ P·dP) rounded to T once, every product
// accumulated in fp32; under TF32 (AttentionMath, fp32 storage) each product's operands are first
// rounded to TF32 as the CPU's TF32 GEMMs round them (core/dtype.h's round_to_tf32). Saved state:
// P [rows, NH, Tn] in T (query row, head, key position in the sequence; 0 past its end). Device
// pointers; asynchronous on ctx.stream(); capture-safe.
#pragma once
#include <cstddef>

#include "backend/cuda/attention.h"
#include "backend/cuda/context.h"
#include "core/dtype.h"

namespace mptrain::cuda {

// Bytes of the saved P and of the scratch (scores or dP in fp32, then dS): at most attention.h's
// attention_saved_bytes and attention_scratch_bytes for ⌈rows / Tn⌉ sequences of Tn, the memory
// backend.h's AttentionArgs gives a packed batch.
size_t attention_packed_saved_bytes(int rows, int Tn, int NH, StorageType t);
size_t attention_packed_scratch_bytes(int rows, int Tn, int NH, StorageType t);

// out (=), saved (=). scratch: attention_packed_scratch_bytes, not preserved.
template <class T>
void attention_packed_forward(T* out, void* saved, const T* qkv, const int* cu_seqlens, void* scratch,
                              int rows, int B, int Tn, int C, int NH, AttentionMath math, Context& ctx);
// dqkv (=, every element written once). Reads the qkv and saved state forward used.
template <class T>
void attention_packed_backward(T* dqkv, const T* dout, const T* qkv, const void* saved, const int* cu_seqlens,
                               void* scratch, int rows, int B, int Tn, int C, int NH, AttentionMath math,
                               Context& ctx);

}  // namespace mptrain::cuda
