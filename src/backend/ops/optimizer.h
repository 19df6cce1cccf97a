// The optimizer's kernels on flat fp32 buffers: what the CPU backend runs for the optimizer ops
// of the interface (backend/backend.h: adamw, sophia, sophia_hessian, count_unclipped,
// unscale_and_check, sum_squares, scale, muon_momentum, muon_update). The algorithms (which tensors decay,
// bias correction's step, Sophia's schedule of estimates) are optim/'s, written once over those ops.
//
// Every kernel is elementwise or a reduction in a fixed order, so any thread count gives the
// same bits.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace mptrain::cpu {

// Where AdamW also writes the updated weights as a GEMM operand (model/weight_copies.h's copy):
// storage `type`, in the format of arithmetic `math`, the bits to_operand gives. Null ptr: none.
struct OperandCopyOut {
  void* ptr = nullptr;
  StorageType type = StorageType::F32;
  ComputeType math = ComputeType::F32;
};

// AdamW with PyTorch's semantics on n values, reading the gradients as grads·grad_scale:
//   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
//   p ← p − lr · (m / (1−β1^t)) / (sqrt(v / (1−β2^t)) + eps)
// wd is weight_decay where bit i of decay_mask is set (null: everywhere), else 0: the same bits as
// an update per tensor with its own weight_decay. With copy.ptr, each block of the new weights is
// also written into the copy while it is in cache: the weight-copy refresh without its own pass
// over the fp32 weights.
void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t t, float grad_scale = 1.0f,
                  const std::uint32_t* decay_mask = nullptr, const OperandCopyOut& copy = {});

// Sophia-G's update (optim/sophia.h) on n values: decay, momentum, clipped sign step. rho_b = ρ·b.
// decay_mask as adamw_update's.
void sophia_update(float* params, const float* grads, float* m, const float* h, size_t n, float lr,
                   float beta1, float rho_b, float weight_decay, float grad_scale = 1.0f,
                   const std::uint32_t* decay_mask = nullptr);
// h ← β2·h + (1−β2)·g⊙g over n values.
void sophia_hessian_update(float* h, const float* ghat, size_t n, float beta2);
// How many of n coordinates have |m| < rho_b·h (their update is not clipped).
size_t sophia_unclipped_count(const float* m, const float* h, size_t n, float rho_b);

// sum x², accumulated in double over fixed-size blocks summed in order: the same value for any
// number of threads.
double sum_of_squares(const float* x, size_t n);
// x ← x·factor.
void scale(float* x, size_t n, float factor);
// Muon (optim/muon.h) on one [rows, cols] matrix whose rows lie ld elements apart in m, grads and
// params (a column block of a wider matrix when ld > cols); u and o are dense [rows, cols]:
//   m ← mu·m + g;  u = nesterov ? g + mu·m : m;  g = grads·grad_scale
//   p ← p·(1 − lr·wd) − lr·scale·o        (the factors rounded once from double, as PyTorch's
//                                           mul_(1 − lr·wd) and add_(o, alpha=−lr·scale))
void muon_momentum(float* m, const float* grads, float* u, int64_t rows, int64_t cols, int64_t ld, float mu,
                   bool nesterov, float grad_scale);
void muon_update(float* params, const float* o, int64_t rows, int64_t cols, int64_t ld, float lr,
                 float weight_decay, float scale);
// c ← alpha·acc + beta·c over n values (a matmul's BLAS scalars around its fp32 product).
void scale_add(float* c, const float* acc, size_t n, float alpha, float beta);

// GradScaler's unscale: g ← g·inv_scale; true when any element was inf or NaN.
bool unscale_and_check(float* grads, size_t n, float inv_scale);

}  // namespace mptrain::cpu
