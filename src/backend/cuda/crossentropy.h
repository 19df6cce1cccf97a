// Fused softmax + cross-entropy + logit gradient over a padded vocabulary on the GPU: the
// contract of backend/ops/crossentropy.h (crossentropy_forward_backward) for logits of a
// storage type T. Probabilities are never stored. Device pointers; asynchronous.
#pragma once
#include "backend/cuda/context.h"

namespace mptrain::cuda {

// logits[N,Vp] (T); columns V..Vp-1 are padding (probability 0, gradient 0).
// targets[N] in [0,V), or -1 to ignore a row (loss 0, gradient 0). A target outside [-1,V)
// cannot be checked without a host sync: its row's loss is written as NaN, so it surfaces.
// losses[N] (=, fp32) = -log softmax(logits[n,:V])[target].
// dlogits (nullable; =, T): dloss[n]·(softmax - onehot(target)), 0 on padded columns and
// ignored rows; may alias logits. dloss[N] (fp32) is required when dlogits is requested.
template <class T>
void crossentropy_forward_backward(float* losses, T* dlogits, const T* logits, const int* targets,
                                   const float* dloss, int N, int V, int Vp, Context& ctx);

}  // namespace mptrain::cuda
