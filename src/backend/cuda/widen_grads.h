// The last step of a 16-bit backward on the device, shared by Gpt2Device and BertDevice: the
// gradients the launchers wrote in T (one storage type per op) go to the fp32 buffer the
// optimizer reads, rounded as the host rounds (cast.h), either written or, when gradients
// accumulate over micro-batches, widened into fp32 scratch and added. Per range of the flat
// table (widen_grad_range) so that a gradient-ready hook (grad_ready.h) can announce each range
// as soon as its own cast is enqueued.
#pragma once
#include <cstddef>
#include <type_traits>

#include "backend/cuda/cast.h"
#include "backend/cuda/context.h"
#include "backend/cuda/residual.h"

namespace mptrain::cuda {

// fp32[0, n) = widen(src) or, accumulating, fp32 += widen(src) through scratch[0, n).
// T is Bf16 or Fp16. Device pointers; asynchronous on ctx.stream().
template <class T>
void widen_grads(float* fp32, float* scratch, const T* src, size_t n, bool accumulating, Context& ctx) {
  static_assert(std::is_same_v<T, Bf16> || std::is_same_v<T, Fp16>, "16-bit gradients only");
  float* dst = accumulating ? scratch : fp32;
  if constexpr (std::is_same_v<T, Bf16>)
    cast_bf16_to_f32(dst, src, n, ctx.stream());
  else
    cast_f16_to_f32(dst, src, n, ctx.stream());
  if (accumulating) accumulate<float>(fp32, dst, n, ctx);
}

// widen_grads over [begin, end) of three buffers in the parameter table's layout: fp32, the
// fp32 scratch (read only when accumulating; may be null otherwise) and the 16-bit gradients.
template <class T>
void widen_grad_range(float* fp32, float* scratch, const T* src, size_t begin, size_t end, bool accumulating,
                      Context& ctx) {
  widen_grads<T>(fp32 + begin, accumulating ? scratch + begin : nullptr, src + begin, end - begin,
                 accumulating, ctx);
}

}  // namespace mptrain::cuda
