// Row bookkeeping of BERT's heads on the GPU: gather the rows a head reads (the masked
// positions for the MLM head, the [CLS] rows for the pooler), scatter-add their gradients back,
// and each row's arg-max (the heads' accuracy). Index lists are device ints; sizes are host
// ints. Device pointers; asynchronous on ctx's stream.
#pragma once
#include "backend/cuda/context.h"

namespace mptrain::cuda {

// out[r, :] (=) = in[rows[r], :] for r < R, and 0 for R <= r < R_out (a head's padding rows,
// which take part in its GEMMs but not in its loss). in has R_in rows of C columns; an index
// outside [0, R_in) leaves its row 0 and raises Context::kFaultRowIndex.
template <class T>
void gather_rows(T* out, const T* in, const int* rows, int R, int R_out, int R_in, int C, Context& ctx);

// dst[rows[r], :] += src[r, :] for r < R, dst of R_dst rows (an index outside [0, R_dst) is
// skipped and raises Context::kFaultRowIndex). The rows must be distinct (every destination row
// has one writer: no atomics, deterministic); two lists that may share rows need two calls.
template <class T>
void scatter_add_rows(T* dst, const T* src, const int* rows, int R, int R_dst, int C, Context& ctx);

// Raises Context::kFaultPacking unless cu_seqlens [B+1] (device ints) starts at 0, holds
// sequences of 1..T rows and ends at `rows`: what the host checks of a host-visible backend's
// packed batch (backend/backend.h's EmbeddingArgs), checked where the offsets live.
void check_packing(const int* cu_seqlens, int B, int T, int rows, Context& ctx);

// best[r] (=) = the index of the largest of x[r, 0..V) (the first on ties, as the CPU's
// argmax; unspecified for a row with a NaN), rows of `stride` elements (V <= stride).
template <class T>
void row_argmax(int* best, const T* x, int R, int V, int stride, Context& ctx);

}  // namespace mptrain::cuda
