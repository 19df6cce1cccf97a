// Input embeddings on the GPU (word + position, + token type for BERT): the contract of
// backend/ops/embeddings.h for a storage type T. Device pointers; asynchronous. Ids are trusted
// (validated on the host before they are staged).
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// out[B,T,C] (=) = (word[tokens[b,t]] + type[types[b,t]]) + pos[t]: the CPU's order of the
// additions, each in fp32 (then one rounding to T). types null: word + pos.
template <class T>
void embeddings_forward(T* out, const int* tokens, const int* types, const T* word, const T* pos,
                        const T* type, int B, int Tn, int C, Context& ctx);

// Bytes of device scratch embeddings_backward needs (a sort of B·T token ids; asks CUB, so a GPU
// must be present).
size_t embeddings_backward_scratch_bytes(int B, int Tn);

// dword[tok] += dout[b,t] except for the row pad_token (-1: every row, nn.Embedding's
// padding_idx); dpos[t] += Σ_b dout[b,t]; dtype[types[b,t]] += dout[b,t] (types null: none)
// (all accumulated, +=). Deterministic without atomics: positions sorted by token (stable radix
// sort), each distinct token's row adds its positions' gradients in increasing (b,t) order; each
// token type's row sums its positions in (b, t) order. n_types: rows of dtype.
template <class T>
void embeddings_backward(T* dword, T* dpos, T* dtype, const T* dout, const int* tokens, const int* types,
                         int pad_token, void* scratch, size_t scratch_bytes, int B, int Tn, int C,
                         int n_types, Context& ctx);

}  // namespace mptrain::cuda
