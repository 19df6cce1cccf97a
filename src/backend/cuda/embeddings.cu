// Input embedding kernels (embeddings.h), GPT-2's word + position and BERT's + token type.
// Forward: one thread per 16-byte pack of a row (scalar when C or a pointer does not allow
// packs), the CPU's order of the additions, (word + type) + pos. Backward: dpos by a kernel over
// (t, c) summing b in order; dword by a stable radix sort of (token, row) and one block per
// distinct token summing its rows in order (the [PAD] row left out), so the result is
// bit-identical run to run; the token-type rows by one thread per (type, channel) walking the
// rows in order: type_vocab is 2 in every BERT, so this is 2·C threads reading dout once
// each (coalesced across channels), deterministic without atomics.
// Packed sequences (cu_seqlens): a row's position is its offset in its sequence (found by a binary
// search over cu_seqlens), dpos sums sequence b's row cu[b] + t over the sequences longer than t,
// and dword and dtype, which never look at positions, walk the packed rows as they are.
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/embeddings.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/profiling.h"
#include "core/error.h"

namespace mptrain::cuda {

namespace {

std::string dims(int B, int Tn, int C) {
  return "B=" + std::to_string(B) + " T=" + std::to_string(Tn) + " C=" + std::to_string(C);
}

// rows: B·T without cu_seqlens; packed, the tensors' rows, at most B·T (the sequences' own
// lengths live in device memory and are trusted: the host checked them before staging).
void check_rows(const char* op, const int* cu_seqlens, int rows, int B, int Tn, int C) {
  const int64_t full = static_cast<int64_t>(B) * Tn;
  if (cu_seqlens == nullptr)
    MPT_CHECK(rows == full,
              std::string("[") + op + "] " + std::to_string(rows) + " rows for " + dims(B, Tn, C));
  else
    MPT_CHECK(rows >= 0 && rows <= full, std::string("[") + op + "] packed sequences hold " +
                                             std::to_string(rows) +
                                             " rows, more than B·T: " + dims(B, Tn, C));
}

// W = elements per thread (kPack<T> when vectorised, else 1). Index math in size_t: B·T·C
// can pass 2^31. types null: no token-type term. cu_seqlens null: row bt is position bt % Tn.
template <class T, int W>
__global__ void embeddings_forward_kernel(T* out, const int* tokens, const int* types, const T* word,
                                          const T* pos, const T* type, const int* cu_seqlens, int B, int rows,
                                          int Tn, int C) {
  const size_t groups = static_cast<size_t>(C / W);
  const size_t total = static_cast<size_t>(rows) * groups;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t bt = i / groups;
    const size_t c = (i % groups) * W;
    const size_t t =
        cu_seqlens ? bt - static_cast<size_t>(cu_seqlens[packed_sequence_of(cu_seqlens, B, bt)]) : bt % Tn;
    const T* e = word + static_cast<size_t>(tokens[bt]) * C + c;
    const T* y = types ? type + static_cast<size_t>(types[bt]) * C + c : nullptr;
    const T* p = pos ? pos + t * C + c : nullptr;  // null: no position term (Llama's)
    T* o = out + bt * C + c;
    if constexpr (W == 1) {
      const float w = to_f32(*e), v = y ? w + to_f32(*y) : w;
      *o = from_f32<T>(p ? v + to_f32(*p) : v);
    } else {
      const Pack<T> pe = load_pack(e);
      Pack<T> py{}, pp{};
      if (y) py = load_pack(y);
      if (p) pp = load_pack(p);
      Pack<T> r;
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const float w = to_f32(pe.v[k]), v = y ? w + to_f32(py.v[k]) : w;
        r.v[k] = from_f32<T>(p ? v + to_f32(pp.v[k]) : v);
      }
      store_pack(o, r);
    }
  }
}

// dwpe[t,c] += Σ_b dout[b,t,c], one thread per (t, c), b ascending. Packed: Σ over the sequences
// b longer than t of dout[cu[b] + t, c], b ascending (the B·T sum's order, without its padding).
template <class T>
__global__ void encoder_dwpe_kernel(T* dwpe, const T* dout, const int* cu_seqlens, int B, int Tn, int C) {
  const size_t total = static_cast<size_t>(Tn) * C;
  const size_t stride = static_cast<size_t>(Tn) * C;  // from one batch row to the next
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    if (cu_seqlens) {
      const int t = static_cast<int>(i / C);
      const size_t c = i % C;
      for (int b = 0; b < B; ++b) {
        const int first = cu_seqlens[b];
        if (t < cu_seqlens[b + 1] - first) acc += to_f32(dout[static_cast<size_t>(first + t) * C + c]);
      }
    } else {
      for (int b = 0; b < B; ++b) acc += to_f32(dout[static_cast<size_t>(b) * stride + i]);
    }
    dwpe[i] = from_f32<T>(to_f32(dwpe[i]) + acc);
  }
}

__global__ void iota_kernel(int* v, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v[i] = i;
}

// Block i of the sorted order: if it starts a run of equal tokens, it sums the run's rows of
// dout (rows ascending, as the stable sort left them) and adds the sum to that token's
// row of dwte (none for pad_token's run). Blocks inside a run exit at once (the test is
// uniform over the block, so no thread can miss a barrier: there is none).
template <class T>
__global__ void encoder_dwte_kernel(T* dwte, const T* dout, const int* sorted_tokens, const int* sorted_rows,
                                    int rows, int C, int pad_token) {
  const int i = blockIdx.x;
  const int tok = sorted_tokens[i];
  if (tok == pad_token || (i > 0 && sorted_tokens[i - 1] == tok)) return;
  int end = i + 1;
  while (end < rows && sorted_tokens[end] == tok) ++end;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int k = i; k < end; ++k) acc += to_f32(dout[static_cast<size_t>(sorted_rows[k]) * C + c]);
    T* w = dwte + static_cast<size_t>(tok) * C + c;
    *w = from_f32<T>(to_f32(*w) + acc);
  }
}

// Scratch layout: sorted tokens, rows in, rows out (`rows` ints each, 256-byte aligned), then
// CUB's temporary storage.
size_t align256(size_t x) { return (x + 255) / 256 * 256; }

size_t cub_temp_bytes(int rows) {
  size_t bytes = 0;
  MPT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int*>(nullptr),
                                                 static_cast<int*>(nullptr), static_cast<const int*>(nullptr),
                                                 static_cast<int*>(nullptr), rows));
  return bytes;
}

size_t scratch_bytes_for(int rows) {
  if (rows <= 0) return 0;
  return 3 * align256(static_cast<size_t>(rows) * sizeof(int)) + cub_temp_bytes(rows);
}

// dtype[k, c] += Σ_{n: types[n] == k} dout[n, c], one thread per (k, c), n ascending.
template <class T>
__global__ void token_type_backward_kernel(T* dtype, const T* dout, const int* types, int rows, int C,
                                           int n_types) {
  const size_t total = static_cast<size_t>(n_types) * C;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(i / C);
    const size_t c = i % C;
    float acc = 0.0f;
    for (int n = 0; n < rows; ++n)
      if (types[n] == k) acc += to_f32(dout[static_cast<size_t>(n) * C + c]);
    dtype[i] = from_f32<T>(to_f32(dtype[i]) + acc);
  }
}

}  // namespace

template <class T>
void embeddings_forward(T* out, const int* tokens, const int* types, const T* word, const T* pos,
                        const T* type, const int* cu_seqlens, int B, int Tn, int C, int rows, Context& ctx) {
  MPT_PROFILE_RANGE("embeddings_forward");
  MPT_CHECK(B >= 0 && Tn >= 0 && C > 0, "[embeddings_forward] bad size: " + dims(B, Tn, C));
  check_rows("embeddings_forward", cu_seqlens, rows, B, Tn, C);
  if (rows == 0) return;
  MPT_CHECK(out && tokens && word && (!types || type),
            "[embeddings_forward] null pointer: " + dims(B, Tn, C));
  constexpr int P = kPack<T>;
  const bool vec =
      C % P == 0 && aligned16(out) && aligned16(word) && aligned16(pos) && (!types || aligned16(type));
  const int threads = 256;  // a warp multiple; grid-stride over (position, pack)
  const size_t items = static_cast<size_t>(rows) * (vec ? C / P : C);
  const unsigned grid = grid_for(items, threads, ctx.info().sm_count);
  if (vec)
    embeddings_forward_kernel<T, P>
        <<<grid, threads, 0, ctx.stream()>>>(out, tokens, types, word, pos, type, cu_seqlens, B, rows, Tn, C);
  else
    embeddings_forward_kernel<T, 1>
        <<<grid, threads, 0, ctx.stream()>>>(out, tokens, types, word, pos, type, cu_seqlens, B, rows, Tn, C);
  MPT_CUDA_CHECK_LAUNCH("embeddings_forward_kernel");
}

size_t embeddings_backward_scratch_bytes(int B, int Tn) { return scratch_bytes_for(B * Tn); }

template <class T>
void embeddings_backward(T* dwte, T* dwpe, T* dtype, const T* dout, const int* tokens, const int* types,
                         const int* cu_seqlens, int pad_token, void* scratch, size_t scratch_bytes, int B,
                         int Tn, int C, int rows, int n_types, Context& ctx) {
  MPT_PROFILE_RANGE("embeddings_backward");
  MPT_CHECK(B >= 0 && Tn >= 0 && C > 0 && (!types || n_types > 0),
            "[embeddings_backward] bad size: " + dims(B, Tn, C) + " types=" + std::to_string(n_types));
  check_rows("embeddings_backward", cu_seqlens, rows, B, Tn, C);
  if (rows == 0) return;
  MPT_CHECK(dwte && dout && tokens && scratch && (!types || dtype),
            "[embeddings_backward] null pointer: " + dims(B, Tn, C));
  const size_t need = scratch_bytes_for(rows);
  MPT_CHECK(scratch_bytes >= need, "[embeddings_backward] scratch of " + std::to_string(scratch_bytes) +
                                       " bytes, needs " + std::to_string(need) + ": " + dims(B, Tn, C) +
                                       " rows=" + std::to_string(rows));
  cudaStream_t s = ctx.stream();
  const int threads = 256;  // a warp multiple; dwpe: one thread per (t, c)
  if (dwpe) {               // null: no position table (Llama's)
    encoder_dwpe_kernel<T>
        <<<grid_for(static_cast<size_t>(Tn) * C, threads, ctx.info().sm_count), threads, 0, s>>>(
            dwpe, dout, cu_seqlens, B, Tn, C);
    MPT_CUDA_CHECK_LAUNCH("encoder_dwpe_kernel");
  }

  const size_t ints = align256(static_cast<size_t>(rows) * sizeof(int));
  char* base = static_cast<char*>(scratch);
  int* sorted_tokens = reinterpret_cast<int*>(base);
  int* rows_in = reinterpret_cast<int*>(base + ints);
  int* rows_out = reinterpret_cast<int*>(base + 2 * ints);
  void* temp = base + 3 * ints;
  size_t temp_bytes = scratch_bytes - 3 * ints;
  iota_kernel<<<grid_for(static_cast<size_t>(rows), threads, ctx.info().sm_count), threads, 0, s>>>(rows_in,
                                                                                                    rows);
  MPT_CUDA_CHECK_LAUNCH("iota_kernel");
  // Token ids are non-negative ints: sorting all 32 bits is correct for any vocabulary size.
  MPT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, sorted_tokens, rows_in, rows_out,
                                                 rows, 0, static_cast<int>(sizeof(int) * 8), s));
  // One block per sorted row (most exit at once); 256 threads stride over C.
  encoder_dwte_kernel<T><<<rows, threads, 0, s>>>(dwte, dout, sorted_tokens, rows_out, rows, C, pad_token);
  MPT_CUDA_CHECK_LAUNCH("encoder_dwte_kernel");
  if (!types) return;
  const int tthreads = 128;  // n_types·C threads (1536 for BERT-base): small blocks spread them over SMs
  token_type_backward_kernel<T>
      <<<grid_for(static_cast<size_t>(n_types) * C, tthreads, ctx.info().sm_count), tthreads, 0, s>>>(
          dtype, dout, types, rows, C, n_types);
  MPT_CUDA_CHECK_LAUNCH("token_type_backward_kernel");
}

#define MPT_INSTANTIATE(T)                                                                                   \
  template void embeddings_forward<T>(T*, const int*, const int*, const T*, const T*, const T*, const int*,  \
                                      int, int, int, int, Context&);                                         \
  template void embeddings_backward<T>(T*, T*, T*, const T*, const int*, const int*, const int*, int, void*, \
                                       size_t, int, int, int, int, int, Context&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE)

}  // namespace mptrain::cuda
