// Input embeddings: word + position (GPT-2's wte and wpe), + token type for BERT (segment A = 0,
// B = 1).
#pragma once

namespace mptrain::cpu {

// out[B,T,C] = word[tokens[b,t]] + pos[t] (+ type[types[b,t]]; types null: none; pos null: no
// position term, Llama's token rows alone). Ids are
// validated by the caller (the data layer, the model against its vocabulary and type count).
// With cu_seqlens [B+1] the rows are packed sequences (backend/backend.h's EmbeddingArgs):
// sequence b is rows [cu_seqlens[b], cu_seqlens[b+1]) at positions 0, 1, ...
void embeddings_forward(float* out, const int* tokens, const int* types, const float* word, const float* pos,
                        const float* type, int B, int T, int C, const int* cu_seqlens = nullptr);

// dword[tok] += dout[b,t]; dpos[t] += dout[b,t] (dpos null: none); dtype[types[b,t]] += dout[b,t]
// (types null: none)  (accumulated, +=).
// The word row pad_token gets nothing, as nn.Embedding's padding_idx (Hugging Face's BERT
// passes padding_idx = pad_token_id); -1 = every row takes gradient.
void embeddings_backward(float* dword, float* dpos, float* dtype, const float* dout, const int* tokens,
                         const int* types, int pad_token, int B, int T, int C,
                         const int* cu_seqlens = nullptr);

}  // namespace mptrain::cpu
