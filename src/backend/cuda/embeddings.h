// BERT's input embeddings on the GPU (word + position + token type): the contract of
// backend/ops/embeddings.h for a storage type T. Device pointers; asynchronous. Ids are trusted
// (the device model validates the batch on the host before uploading it).
#pragma once
#include <cstddef>

#include "backend/cuda/context.h"

namespace mptrain::cuda {

// out[B,T,C] (=) = (word[tokens[b,t]] + type[types[b,t]]) + pos[t]: the CPU's order of the two
// additions, each rounded to fp32 (then once to T).
template <class T>
void embeddings_forward(T* out, const int* tokens, const int* types, const T* word, const T* pos,
                        const T* type, int B, int Tn, int C, Context& ctx);

// Bytes of device scratch embeddings_backward needs (encoder.h's sort; asks CUB: needs a GPU).
size_t embeddings_backward_scratch_bytes(int B, int Tn);

// dword[tok] += dout[b,t] except for the row pad_token (-1: every row); dpos[t] += Σ_b dout[b,t];
// dtype[types[b,t]] += dout[b,t]  (all accumulated, +=). Deterministic: word and position rows
// through encoder_backward (sorted, no atomics); each token type's row sums its positions in
// (b, t) order. n_types: rows of dtype (every id in types is below it).
template <class T>
void embeddings_backward(T* dword, T* dpos, T* dtype, const T* dout, const int* tokens, const int* types,
                         int pad_token, void* scratch, size_t scratch_bytes, int B, int Tn, int C,
                         int n_types, Context& ctx);

}  // namespace mptrain::cuda
