// Where a model's backward writes its weight gradients. On the CPU's plan: straight into the
// fp32 master gradients (+=). Under a GPU's plan (policy.weight_grads 16-bit, as llm.c): into
// one micro-batch's 16-bit gradients, zeroed by begin() and widened into the fp32 masters by
// finish() — the backend's gradient finaliser, which runs before the gradients are handed on
// (to the optimizer step, or a data-parallel reduction).
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "backend/backend.h"
#include "core/buffer.h"
#include "precision/policy.h"

namespace mptrain {

class WeightGrads {
 public:
  // For n parameters under `policy` (allocates the 16-bit buffer when the policy has one).
  void setup(size_t n, const Policy& policy);
  // The gradient of the parameter whose fp32 gradient starts at master_grad (a pointer into
  // master, the fp32 gradients of the same table), as a view of `dims`.
  View at(const float* master_grad, const FloatBuffer& master, std::initializer_list<std::int64_t> dims);
  // Before a backward: the 16-bit gradients start at 0 (nothing on the CPU's plan).
  void begin(Backend& be);
  // After it: master (+=) the 16-bit gradients, widened (nothing on the CPU's plan).
  void finish(Backend& be, FloatBuffer& master);

 private:
  View lowp() { return View::of(lowp_.data(), type_, {static_cast<std::int64_t>(n_)}); }
  StorageType type_ = StorageType::F32;
  size_t n_ = 0;
  FloatBuffer lowp_;  // n_ values of type_, or empty
};

}  // namespace mptrain
