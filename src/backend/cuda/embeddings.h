// Input embeddings on the GPU (word + position, + token type for BERT): the contract of
// backend/ops/embeddings.h for a storage type T. Device pointers; asynchronous. Ids are trusted
// (validated on the host before they are staged), and so are packed sequences' cu_seqlens.
//
// Layouts: B sequences of Tn rows (row b·Tn + t at position t), or packed sequences
// (backend/backend.h's EmbeddingArgs: cu_seqlens [B+1] device ints, sequence b = rows
// [cu[b], cu[b+1]), each at most Tn long, row cu[b] + t at position t) in `rows` = cu[B] <= B·Tn
// rows of out / dout, tokens and types.
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// out[rows, C] (=) = (word[tokens[r]] + type[types[r]]) + pos[t of r]: the CPU's order of the
// additions, each in fp32 (then one rounding to T). types null: word + pos; pos null: no position
// term (Llama's token rows alone). cu_seqlens null: the
// B·Tn layout (rows = B·Tn).
template <class T>
void embeddings_forward(T* out, const int* tokens, const int* types, const T* word, const T* pos,
                        const T* type, const int* cu_seqlens, int B, int Tn, int C, int rows, Context& ctx);
// The B·Tn layout.
template <class T>
void embeddings_forward(T* out, const int* tokens, const int* types, const T* word, const T* pos,
                        const T* type, int B, int Tn, int C, Context& ctx) {
  embeddings_forward<T>(out, tokens, types, word, pos, type, nullptr, B, Tn, C, B * Tn, ctx);
}

// Bytes of device scratch embeddings_backward needs for B·Tn rows, and so for any packing of B
// sequences of at most Tn (a sort of the token ids; asks CUB, so a GPU must be present).
size_t embeddings_backward_scratch_bytes(int B, int Tn);

// dword[tok] += dout[r] except for the row pad_token (-1: every row, nn.Embedding's
// padding_idx); dpos[t] += Σ dout[r] over the rows r at position t (dpos null: none); dtype[types[r]] +=
// dout[r] (types null: none) (all accumulated, +=). Deterministic without atomics: rows sorted by token
// (stable radix sort), each distinct token's row adds its rows' gradients in increasing row
// order; dpos adds sequences in increasing b; each token type's row sums its rows in order.
// n_types: rows of dtype. cu_seqlens null: the B·Tn layout (rows = B·Tn).
template <class T>
void embeddings_backward(T* dword, T* dpos, T* dtype, const T* dout, const int* tokens, const int* types,
                         const int* cu_seqlens, int pad_token, void* scratch, size_t scratch_bytes, int B,
                         int Tn, int C, int rows, int n_types, Context& ctx);
// The B·Tn layout.
template <class T>
void embeddings_backward(T* dword, T* dpos, T* dtype, const T* dout, const int* tokens, const int* types,
                         int pad_token, void* scratch, size_t scratch_bytes, int B, int Tn, int C,
                         int n_types, Context& ctx) {
  embeddings_backward<T>(dword, dpos, dtype, dout, tokens, types, nullptr, pad_token, scratch, scratch_bytes,
                         B, Tn, C, B * Tn, n_types, ctx);
}

}  // namespace mptrain::cuda
