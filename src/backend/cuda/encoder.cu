// Encoder kernels. Forward: one thread per 16-byte pack of a row (scalar when C or a pointer
// does not allow packs). Backward: dwpe by a kernel over (t, c) summing b in order; dwte by
// a stable radix sort of (token, position) and one block per distinct token summing its
// positions in order, so the result is bit-identical run to run.
#include <cub/device/device_radix_sort.cuh>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/encoder.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

std::string dims(int B, int Tn, int C) {
  return "B=" + std::to_string(B) + " T=" + std::to_string(Tn) + " C=" + std::to_string(C);
}

// W = elements per thread (kPack<T> when vectorised, else 1). Index math in size_t: B·T·C
// can pass 2^31.
template <class T, int W>
__global__ void encoder_forward_kernel(T* out, const int* tokens, const T* wte, const T* wpe, int BT, int Tn,
                                       int C) {
  const size_t groups = static_cast<size_t>(C / W);
  const size_t total = static_cast<size_t>(BT) * groups;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t bt = i / groups;
    const size_t c = (i % groups) * W;
    const size_t t = bt % Tn;
    const T* e = wte + static_cast<size_t>(tokens[bt]) * C + c;
    const T* p = wpe + t * C + c;
    T* o = out + bt * C + c;
    if constexpr (W == 1) {
      *o = from_f32<T>(to_f32(*e) + to_f32(*p));
    } else {
      const Pack<T> pe = load_pack(e), pp = load_pack(p);
      Pack<T> r;
#pragma unroll
      for (int k = 0; k < W; ++k) r.v[k] = from_f32<T>(to_f32(pe.v[k]) + to_f32(pp.v[k]));
      store_pack(o, r);
    }
  }
}

// dwpe[t,c] += Σ_b dout[b,t,c], one thread per (t, c).
template <class T>
__global__ void encoder_dwpe_kernel(T* dwpe, const T* dout, int B, int Tn, int C) {
  const size_t total = static_cast<size_t>(Tn) * C;
  const size_t stride = static_cast<size_t>(Tn) * C;  // from one batch row to the next
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    for (int b = 0; b < B; ++b) acc += to_f32(dout[static_cast<size_t>(b) * stride + i]);
    dwpe[i] = from_f32<T>(to_f32(dwpe[i]) + acc);
  }
}

__global__ void iota_kernel(int* v, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v[i] = i;
}

// Block i of the sorted order: if it starts a run of equal tokens, it sums the run's rows of
// dout (positions ascending, as the stable sort left them) and adds the sum to that token's
// row of dwte (none for pad_token's run). Blocks inside a run exit at once (the test is
// uniform over the block, so no thread can miss a barrier: there is none).
template <class T>
__global__ void encoder_dwte_kernel(T* dwte, const T* dout, const int* sorted_tokens, const int* sorted_pos,
                                    int BT, int C, int pad_token) {
  const int i = blockIdx.x;
  const int tok = sorted_tokens[i];
  if (tok == pad_token || (i > 0 && sorted_tokens[i - 1] == tok)) return;
  int end = i + 1;
  while (end < BT && sorted_tokens[end] == tok) ++end;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int k = i; k < end; ++k) acc += to_f32(dout[static_cast<size_t>(sorted_pos[k]) * C + c]);
    T* w = dwte + static_cast<size_t>(tok) * C + c;
    *w = from_f32<T>(to_f32(*w) + acc);
  }
}

// Scratch layout: sorted tokens, positions in, positions out (BT ints each, 256-byte
// aligned), then CUB's temporary storage.
size_t align256(size_t x) { return (x + 255) / 256 * 256; }

size_t cub_temp_bytes(int BT) {
  size_t bytes = 0;
  MPT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int*>(nullptr),
                                                 static_cast<int*>(nullptr), static_cast<const int*>(nullptr),
                                                 static_cast<int*>(nullptr), BT));
  return bytes;
}

}  // namespace

template <class T>
void encoder_forward(T* out, const int* tokens, const T* wte, const T* wpe, int B, int Tn, int C,
                     Context& ctx) {
  MPT_PROFILE_RANGE("encoder_forward");
  MPT_CHECK(B >= 0 && Tn >= 0 && C > 0, "[encoder_forward] bad size: " + dims(B, Tn, C));
  const int BT = B * Tn;
  if (BT == 0) return;
  MPT_CHECK(out && tokens && wte && wpe, "[encoder_forward] null pointer: " + dims(B, Tn, C));
  constexpr int P = kPack<T>;
  const bool vec = C % P == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe);
  const int threads = 256;  // a warp multiple; grid-stride over (position, pack)
  const size_t items = static_cast<size_t>(BT) * (vec ? C / P : C);
  const unsigned grid = grid_for(items, threads, ctx.info().sm_count);
  if (vec)
    encoder_forward_kernel<T, P><<<grid, threads, 0, ctx.stream()>>>(out, tokens, wte, wpe, BT, Tn, C);
  else
    encoder_forward_kernel<T, 1><<<grid, threads, 0, ctx.stream()>>>(out, tokens, wte, wpe, BT, Tn, C);
  MPT_CUDA_CHECK_LAUNCH("encoder_forward_kernel");
}

size_t encoder_backward_scratch_bytes(int B, int Tn) {
  const int BT = B * Tn;
  if (BT <= 0) return 0;
  return 3 * align256(static_cast<size_t>(BT) * sizeof(int)) + cub_temp_bytes(BT);
}

template <class T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const int* tokens, void* scratch, size_t scratch_bytes,
                      int B, int Tn, int C, Context& ctx, int pad_token) {
  MPT_PROFILE_RANGE("encoder_backward");
  MPT_CHECK(B >= 0 && Tn >= 0 && C > 0, "[encoder_backward] bad size: " + dims(B, Tn, C));
  const int BT = B * Tn;
  if (BT == 0) return;
  MPT_CHECK(dwte && dwpe && dout && tokens && scratch, "[encoder_backward] null pointer: " + dims(B, Tn, C));
  const size_t need = encoder_backward_scratch_bytes(B, Tn);
  MPT_CHECK(scratch_bytes >= need, "[encoder_backward] scratch of " + std::to_string(scratch_bytes) +
                                       " bytes, needs " + std::to_string(need) + ": " + dims(B, Tn, C));
  cudaStream_t s = ctx.stream();
  const int threads = 256;  // a warp multiple; dwpe: one thread per (t, c)
  encoder_dwpe_kernel<T>
      <<<grid_for(static_cast<size_t>(Tn) * C, threads, ctx.info().sm_count), threads, 0, s>>>(dwpe, dout, B,
                                                                                               Tn, C);
  MPT_CUDA_CHECK_LAUNCH("encoder_dwpe_kernel");

  const size_t ints = align256(static_cast<size_t>(BT) * sizeof(int));
  char* base = static_cast<char*>(scratch);
  int* sorted_tokens = reinterpret_cast<int*>(base);
  int* pos_in = reinterpret_cast<int*>(base + ints);
  int* pos_out = reinterpret_cast<int*>(base + 2 * ints);
  void* temp = base + 3 * ints;
  size_t temp_bytes = scratch_bytes - 3 * ints;
  iota_kernel<<<grid_for(static_cast<size_t>(BT), threads, ctx.info().sm_count), threads, 0, s>>>(pos_in, BT);
  MPT_CUDA_CHECK_LAUNCH("iota_kernel");
  // Token ids are non-negative ints: sorting all 32 bits is correct for any vocabulary size.
  MPT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, sorted_tokens, pos_in, pos_out, BT,
                                                 0, static_cast<int>(sizeof(int) * 8), s));
  // One block per sorted position (most exit at once); 256 threads stride over C.
  encoder_dwte_kernel<T><<<BT, threads, 0, s>>>(dwte, dout, sorted_tokens, pos_out, BT, C, pad_token);
  MPT_CUDA_CHECK_LAUNCH("encoder_dwte_kernel");
}

#define MPT_INSTANTIATE(T)                                                                       \
  template void encoder_forward<T>(T*, const int*, const T*, const T*, int, int, int, Context&); \
  template void encoder_backward<T>(T*, T*, const T*, const int*, void*, size_t, int, int, int, Context&, int);
MPT_INSTANTIATE(float)
MPT_INSTANTIATE(Bf16)
MPT_INSTANTIATE(Fp16)
#undef MPT_INSTANTIATE

}  // namespace mptrain::cuda
