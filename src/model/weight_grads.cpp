// The weight gradients a backward writes (model/weight_grads.h).
#include "model/weight_grads.h"

#include "model/policy_backend.h"

namespace mptrain {

void WeightGrads::setup(size_t n, const Policy& policy) {
  n_ = n;
  type_ = policy.weight_grads;
  lowp_.resize(lowp_grad_floats(n, policy));
}

View WeightGrads::at(const float* master_grad, const FloatBuffer& master,
                     std::initializer_list<std::int64_t> dims) {
  if (lowp_.size() == 0) return View::f32(master_grad, dims);
  const size_t offset = static_cast<size_t>(master_grad - master.data()) * storage_bytes(type_);
  return View::of(reinterpret_cast<char*>(lowp_.data()) + offset, type_, dims);
}

void WeightGrads::begin(Backend& be) {
  if (lowp_.size() > 0) be.zero(lowp());
}

void WeightGrads::finish(Backend& be, FloatBuffer& master) {
  if (lowp_.size() > 0) be.accumulate(View::f32(master.data(), {static_cast<std::int64_t>(n_)}), lowp());
}

}  // namespace mptrain
