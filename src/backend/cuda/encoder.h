// Token + position embedding on the GPU: backend/ops/encoder.h's contract for a storage type T.
// Device pointers; asynchronous. Token ids are trusted (validated by the data layer).
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// out[B,T,C] = wte[tokens[b,t], :] + wpe[t, :]  (=).
template <class T>
void encoder_forward(T* out, const int* tokens, const T* wte, const T* wpe, int B, int Tn, int C,
                     Context& ctx);

// Bytes of device scratch encoder_backward needs (a sort of B·T token ids; asks CUB, so a GPU
// must be present).
size_t encoder_backward_scratch_bytes(int B, int Tn);

// dwte[tokens[b,t], :] += dout[b,t,:];  dwpe[t,:] += Σ_b dout[b,t,:]  (accumulated, +=).
// Deterministic without atomics: positions are sorted by token (stable radix sort), and each
// distinct token's row adds its positions' gradients in increasing (b,t) order.
// pad_token >= 0: that row of dwte gets nothing (nn.Embedding's padding_idx, BERT's [PAD];
// dwpe still takes those positions), as cpu::embeddings_backward; -1 = every row.
template <class T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const int* tokens, void* scratch, size_t scratch_bytes,
                      int B, int Tn, int C, Context& ctx, int pad_token = -1);

}  // namespace mptrain::cuda
