// Fused softmax + cross-entropy + logit gradient over a padded vocabulary on the GPU: the
// contract of backend/ops/crossentropy.h (crossentropy_forward_backward) for logits of a
// storage type T, and its label-sampling variant (Sophia). Probabilities are never stored.
// Device pointers; asynchronous.
#pragma once
#include <cstdint>

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

// Sophia's Gauss-Newton-Bartlett labels: cpu::crossentropy_sampled_forward_backward's
// contract for logits of type T (backend/ops/crossentropy.h). Each row's label is drawn from
// softmax(logits[n,:V]) inside the same fused pass, with row n's uniform
// core/rng.h label_uniform(seed, counter, n) and the CPU's inverse-CDF walk over 512-column
// block sums, so GPU and CPU draw the same label except where u lies within fp32 rounding of
// a CDF boundary (the block sums and exp differ in their last bits).
//   sampled[N] (=) the drawn label, in [0, V) (padded columns are never drawn)
//   losses[N]  (=) -log softmax(logits[n,:V])[sampled[n]]
//   dlogits    (=, T; required, may alias logits) dloss[n]·(softmax - onehot(sampled[n]))
// losses and dlogits are bit for bit what crossentropy_forward_backward writes for
// targets = sampled. A row whose logits are not finite (no label can be drawn) gets label -1,
// loss NaN and NaN gradients (the CPU throws; here that would need a host sync).
template <class T>
void crossentropy_sampled_forward_backward(float* losses, T* dlogits, int* sampled, const T* logits,
                                           const float* dloss, int N, int V, int Vp, uint64_t seed,
                                           uint64_t counter, Context& ctx);

}  // namespace mptrain::cuda
