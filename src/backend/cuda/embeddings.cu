// BERT embedding kernels (embeddings.h). Forward: one thread per element (grid-stride), the
// CPU's (word + type) + pos. Backward: word and position rows by encoder_backward (with the
// [PAD] row left out); the token-type rows by one thread per (type, channel) walking the
// positions in order: type_vocab is 2 in every BERT, so this is 2·C threads reading dout once
// each (coalesced across channels), deterministic without atomics. A row-chunked two-pass
// reduction would be faster at large B·T; measure first (it is one pass over dout per step).
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/embeddings.h"
#include "backend/cuda/encoder.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

std::string dims(int B, int Tn, int C) {
  return "B=" + std::to_string(B) + " T=" + std::to_string(Tn) + " C=" + std::to_string(C);
}

template <class T>
__global__ void embeddings_forward_kernel(T* out, const int* tokens, const int* types, const T* word,
                                          const T* pos, const T* type, int BT, int Tn, int C) {
  const size_t total = static_cast<size_t>(BT) * C;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t bt = i / C, c = i % C;
    const float w = to_f32(word[static_cast<size_t>(tokens[bt]) * C + c]);
    const float y = to_f32(type[static_cast<size_t>(types[bt]) * C + c]);
    const float p = to_f32(pos[(bt % Tn) * C + c]);
    out[i] = from_f32<T>((w + y) + p);
  }
}

// dtype[k, c] += Σ_{n: types[n] == k} dout[n, c], one thread per (k, c), n ascending.
template <class T>
__global__ void token_type_backward_kernel(T* dtype, const T* dout, const int* types, int BT, int C,
                                           int n_types) {
  const size_t total = static_cast<size_t>(n_types) * C;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(i / C);
    const size_t c = i % C;
    float acc = 0.0f;
    for (int n = 0; n < BT; ++n)
      if (types[n] == k) acc += to_f32(dout[static_cast<size_t>(n) * C + c]);
    dtype[i] = from_f32<T>(to_f32(dtype[i]) + acc);
  }
}

}  // namespace

template <class T>
void embeddings_forward(T* out, const int* tokens, const int* types, const T* word, const T* pos,
                        const T* type, int B, int Tn, int C, Context& ctx) {
  MPT_PROFILE_RANGE("embeddings_forward");
  MPT_CHECK(B >= 0 && Tn >= 0 && C > 0, "[embeddings_forward] bad size: " + dims(B, Tn, C));
  const int BT = B * Tn;
  if (BT == 0) return;
  MPT_CHECK(out && tokens && types && word && pos && type,
            "[embeddings_forward] null pointer: " + dims(B, Tn, C));
  const int threads = 256;  // a warp multiple; grid-stride over (position, channel)
  embeddings_forward_kernel<T>
      <<<grid_for(static_cast<size_t>(BT) * C, threads, ctx.info().sm_count), threads, 0, ctx.stream()>>>(
          out, tokens, types, word, pos, type, BT, Tn, C);
  MPT_CUDA_CHECK_LAUNCH("embeddings_forward_kernel");
}

size_t embeddings_backward_scratch_bytes(int B, int Tn) { return encoder_backward_scratch_bytes(B, Tn); }

template <class T>
void embeddings_backward(T* dword, T* dpos, T* dtype, const T* dout, const int* tokens, const int* types,
                         int pad_token, void* scratch, size_t scratch_bytes, int B, int Tn, int C,
                         int n_types, Context& ctx) {
  MPT_PROFILE_RANGE("embeddings_backward");
  MPT_CHECK(B >= 0 && Tn >= 0 && C > 0 && n_types > 0,
            "[embeddings_backward] bad size: " + dims(B, Tn, C) + " types=" + std::to_string(n_types));
  const int BT = B * Tn;
  if (BT == 0) return;
  MPT_CHECK(dtype && types, "[embeddings_backward] null pointer: " + dims(B, Tn, C));
  encoder_backward<T>(dword, dpos, dout, tokens, scratch, scratch_bytes, B, Tn, C, ctx, pad_token);
  const int threads = 128;  // n_types·C threads (1536 for BERT-base): small blocks spread them over SMs
  token_type_backward_kernel<T><<<grid_for(static_cast<size_t>(n_types) * C, threads, ctx.info().sm_count),
                                  threads, 0, ctx.stream()>>>(dtype, dout, types, BT, C, n_types);
  MPT_CUDA_CHECK_LAUNCH("token_type_backward_kernel");
}

#define MPT_INSTANTIATE(T)                                                                                \
  template void embeddings_forward<T>(T*, const int*, const int*, const T*, const T*, const T*, int, int, \
                                      int, Context&);                                                     \
  template void embeddings_backward<T>(T*, T*, T*, const T*, const int*, const int*, int, void*, size_t,  \
                                       int, int, int, int, Context&);
MPT_INSTANTIATE(float)
MPT_INSTANTIATE(Bf16)
MPT_INSTANTIATE(Fp16)
#undef MPT_INSTANTIATE

}  // namespace mptrain::cuda
