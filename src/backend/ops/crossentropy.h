// Fused softmax + cross-entropy over a padded vocabulary.
//
// logits[N,Vp]; only columns [0,V) take part in the softmax (V..Vp-1 are padding:
// their probability is 0 and their gradient is 0). targets[N] in [0,V), or -1 to
// ignore the position (loss 0, gradient 0).
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace mptrain::cpu {

// losses[N] = -log softmax(logits[n, :V])[targets[n]]  (0 where ignored).
// If dlogits is non-null, also writes (=) dlogits[n,:] = dloss[n]·(softmax - onehot(target)),
// zero on padded columns and ignored rows. dlogits may alias logits.
// dloss[n] is the upstream gradient of losses[n] (e.g. 1/num_valid for a mean); may be null
// when dlogits is null.
void crossentropy_forward_backward(float* losses, float* dlogits, const float* logits, const int* targets,
                                   const float* dloss, int N, int V, int Vp);

// The same losses and gradient with dlogits (=) stored in dtype td (fp32: exactly the call
// above; bf16/fp16: each value rounded once to nearest even, the bits that the fp32 op followed
// by cpu::convert gives). All buffers are required and dlogits must not alias logits.
void crossentropy_forward_backward_typed(float* losses, void* dlogits, StorageType td, const float* logits,
                                         const int* targets, const float* dloss, int N, int V, int Vp);

// Sophia's Gauss-Newton-Bartlett labels: the same fused pass as crossentropy_forward_backward,
// but each row's target is drawn from softmax(logits[n, :V]) inside the pass (from the
// row's exps and their block sums: no extra pass over the logits) instead of being read.
//   sampled[n] (=) the drawn label, in [0, V): padded columns have probability 0, never drawn
//   losses[n]  (=) -log softmax(logits[n, :V])[sampled[n]]
//   dlogits    (=) exactly what crossentropy_forward_backward writes for targets = sampled
//                  (required; may alias logits). dloss[N] as there (required).
// The uniform behind row n is a function of (seed, counter, n) only, so the labels are
// reproducible and independent of the thread count; callers advance `counter` per call.
void crossentropy_sampled_forward_backward(float* losses, float* dlogits, int* sampled, const float* logits,
                                           const float* dloss, int N, int V, int Vp, uint64_t seed,
                                           uint64_t counter);

// probs[n, :] = softmax(logits[n, :V] / temperature), padded columns set to 0. For sampling.
void softmax_forward(float* probs, const float* logits, int N, int V, int Vp, float temperature);

}  // namespace mptrain::cpu
