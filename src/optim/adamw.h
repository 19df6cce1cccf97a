// AdamW (Loshchilov & Hutter) on flat fp32 buffers, with PyTorch's semantics:
//   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
//   p ← p − lr · (m / (1−β1^t)) / (sqrt(v / (1−β2^t)) + eps)
// t counts optimizer steps from 1. Weight decay is applied per call, so callers pass
// wd = 0 for tensors that are not decayed (biases, LayerNorm, per the parameter table).
#pragma once
#include <cstdint>

#include "core/buffer.h"
#include "core/param_table.h"
#include "optim/optimizer.h"

namespace mptrain {

struct AdamWHyper {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// AdamW over every tensor of a parameter table: owns the moments m and v (one
// allocation each, laid out like the parameters; checkpoint prefixes "exp_avg" and
// "exp_avg_sq", PyTorch's names) and applies weight decay only to tensors whose table
// entry says `decay`.
class AdamW : public Optimizer {
 public:
  AdamW(const ParamTable& table, const AdamWHyper& hyper, Backend& be);
  OptimizerKind kind() const override { return OptimizerKind::AdamW; }
  // One update with learning rate lr; t is the 1-based optimizer step (bias correction).
  using Optimizer::step;
  void step(float* params, const float* grads, float lr, int64_t t, float grad_scale) override;
  // With copies, one launch per tensor (its decay as the launch's weight decay) that writes the
  // tensor's copy as it updates it, where the backend can (AdamWArgs::copy): the weight-copy
  // refresh without a second pass over the fp32 weights. The same bits as step() then to_operand.
  bool step(float* params, const float* grads, float lr, int64_t t, float grad_scale,
            std::span<const ToOperandArgs> copies) override;
  FloatBuffer& m() { return state_[0].buffer; }
  FloatBuffer& v() { return state_[1].buffer; }
  const FloatBuffer& m() const { return state_[0].buffer; }
  const FloatBuffer& v() const { return state_[1].buffer; }
  const AdamWHyper& hyper() const { return hyper_; }

 private:
  AdamWArgs args(View params, View grads, View m, View v, float lr, int64_t t, float grad_scale) const;
  // Whether the backend writes every copy's type and arithmetic in the update.
  bool fuses(std::span<const ToOperandArgs> copies) const;

  AdamWHyper hyper_;
};

}  // namespace mptrain
