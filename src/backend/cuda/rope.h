// Rotary position embeddings on the GPU: backend/ops/rope.h's contract (backend.h's RopeArgs) for a
// storage type T, in place, math in fp32 and one rounding to T on store. Device pointer;
// asynchronous on ctx's stream.
#pragma once

#include "backend/cuda/context.h"

namespace mptrain::cuda {

template <class T>
void rope(T* x, int rows, int W, int T_, int heads, int head_size, float theta, bool inverse, Context& ctx);

}  // namespace mptrain::cuda
