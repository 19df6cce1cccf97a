// AdamW over a parameter table: one launch of the backend's adamw op over every tensor, the
// tensors' decay rules as its mask (CPU kernel: backend/cpu/optimizer.cpp).
#include "optim/adamw.h"

#include "core/error.h"

namespace mptrain {

AdamW::AdamW(const ParamTable& table, const AdamWHyper& hyper, Backend& be)
    : Optimizer(table, {"exp_avg", "exp_avg_sq"}, be), hyper_(hyper) {}

AdamWArgs AdamW::args(View params, View grads, View m, View v, float lr, int64_t t, float grad_scale) const {
  return {.params = params,
          .grads = grads,
          .m = m,
          .v = v,
          .lr = lr,
          .beta1 = hyper_.beta1,
          .beta2 = hyper_.beta2,
          .eps = hyper_.eps,
          .weight_decay = hyper_.weight_decay,
          .t = t,
          .grad_scale = grad_scale};
}

void AdamW::step(float* params, const float* grads, float lr, int64_t t, float grad_scale) {
  if (table_.total() == 0) return;
  AdamWArgs a = args(whole(params), whole(grads), whole(m().data()), whole(v().data()), lr, t, grad_scale);
  a.decay_mask = decay_mask();
  be_.adamw(a);
}

bool AdamW::fuses(std::span<const ToOperandArgs> copies) const {
  for (const ToOperandArgs& c : copies) {
    AdamWArgs probe;
    probe.params = probe.grads = probe.m = probe.v = View::dtype_only(StorageType::F32);
    probe.copy = View::dtype_only(c.dst.type);
    probe.math = c.math;
    if (!be_.supports(probe)) return false;
  }
  return true;
}

bool AdamW::step(float* params, const float* grads, float lr, int64_t t, float grad_scale,
                 std::span<const ToOperandArgs> copies) {
  if (copies.empty() || !fuses(copies)) {
    step(params, grads, lr, t, grad_scale);
    return copies.empty();
  }
  // Copies in table order (WeightCopies lists them so): one pointer walks them beside the specs.
  size_t next = 0;
  for (const ParamSpec& spec : table_.specs()) {
    AdamWArgs a = args(flat(params, spec, spec.numel), flat(grads, spec, spec.numel), flat(m().data(), spec, spec.numel),
                       flat(v().data(), spec, spec.numel), lr, t, grad_scale);
    if (!spec.decay) a.weight_decay = 0.0f;  // decay 1 − lr·0 = 1 exactly: the masked update's bits
    if (next < copies.size() && copies[next].src.ptr == params + spec.offset) {
      a.copy = copies[next].dst;
      a.math = copies[next].math;
      ++next;
    }
    be_.adamw(a);
  }
  MPT_CHECK(next == copies.size(), "[adamw] a weight copy whose source starts no parameter tensor, or out of table order");
  return true;
}

}  // namespace mptrain
