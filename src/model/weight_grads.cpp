// The weight gradients a backward writes (model/weight_grads.h).
#include "model/weight_grads.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "model/policy_backend.h"

namespace mptrain {

void WeightGrads::setup(size_t n, const Policy& policy, MemoryResource& memory) {
  n_ = n;
  type_ = policy.weight_grads;
  lowp_.resize(lowp_grad_floats(n, policy), memory);
}

View WeightGrads::at(const float* master_grad, const FloatBuffer& master,
                     std::initializer_list<std::int64_t> dims) {
  if (lowp_.size() == 0) return View::f32(master_grad, dims);
  const size_t offset = static_cast<size_t>(master_grad - master.data()) * storage_bytes(type_);
  return View::of(reinterpret_cast<char*>(lowp_.data()) + offset, type_, dims);
}

void WeightGrads::begin(Backend& be) {
  handed_.clear();
  if (lowp_.size() > 0) be.zero(lowp());
}

void WeightGrads::ready(Backend& be, FloatBuffer& master, ParamRange range) {
  MPT_CHECK(range.begin <= range.end && range.end <= n_,
            "[weight grads] range [" + std::to_string(range.begin) + ", " + std::to_string(range.end) +
                ") is outside the table");
  for (const ParamRange& h : handed_)
    MPT_CHECK(range.end <= h.begin || h.end <= range.begin,
              "[weight grads] range [" + std::to_string(range.begin) + ", " + std::to_string(range.end) +
                  ") was already handed in this backward");
  handed_.push_back(range);
  if (range.size() == 0) return;
  if (lowp_.size() > 0) {
    const auto count = static_cast<std::int64_t>(range.size());
    const size_t at = range.begin * storage_bytes(type_);
    be.accumulate(View::f32(master.data() + range.begin, {count}),
                  View::of(reinterpret_cast<char*>(lowp_.data()) + at, type_, {count}));
  }
  if (hook_ && !be.capturing()) hook_(range);
}

void WeightGrads::replay_hooks() {
  if (!hook_) return;
  for (const ParamRange& r : handed_) hook_(r);
}

void WeightGrads::finish(Backend& be, FloatBuffer& master) {
  std::vector<ParamRange> done = handed_;
  std::sort(done.begin(), done.end(),
            [](const ParamRange& a, const ParamRange& b) { return a.begin < b.begin; });
  size_t at = 0;
  for (const ParamRange& h : done) {
    if (at < h.begin) ready(be, master, {at, h.begin});
    at = std::max(at, h.end);
  }
  if (at < n_) ready(be, master, {at, n_});
}

}  // namespace mptrain
