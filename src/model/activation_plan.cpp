// Activation plan bookkeeping.
#include "model/activation_plan.h"

namespace mptrain {

ActivationPlan::Handle ActivationPlan::add(std::string name, size_t n) {
  entries_.push_back({std::move(name), total_, n});
  total_ += (n + 15) / 16 * 16;
  return entries_.size() - 1;
}

void ActivationPlan::allocate() { buffer_.resize(total_); }

}  // namespace mptrain
