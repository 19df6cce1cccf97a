// Softmax over a padded vocabulary (sampling, and the first half of the fused cross-entropy's
// unfused twin), and the second half of that twin: the loss and logit gradient from stored
// probabilities. The twin (softmax_forward, then crossentropy_from_probs) is the test
// reference and the ladder's "before" row for crossentropy_forward_backward; it writes and
// re-reads an fp32 [N,Vp] probability tensor that the fused kernel never stores.
// Device pointers; asynchronous.
#pragma once
#include "backend/cuda/context.h"

namespace mptrain::cuda {

// probs[N,Vp] (=, fp32) = softmax(logits[n,:V] / temperature), 0 on padded columns
// (cpu softmax_forward's contract). temperature > 0.
template <class T>
void softmax_forward(float* probs, const T* logits, int N, int V, int Vp, float temperature, Context& ctx);

// From probs = softmax_forward(logits, temperature 1): losses[n] (=) = -log probs[n,target];
// dlogits (nullable, =) = dloss[n]·(probs - onehot(target)), 0 on padded columns; targets and
// ignored rows (-1) as in crossentropy.h.
template <class T>
void crossentropy_from_probs(float* losses, T* dlogits, const float* probs, const int* targets,
                             const float* dloss, int N, int V, int Vp, Context& ctx);

}  // namespace mptrain::cuda
