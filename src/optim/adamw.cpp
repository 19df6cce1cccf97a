// AdamW over a parameter table: one launch of the backend's adamw op over every tensor, the
// tensors' decay rules as its mask (CPU kernel: backend/cpu/optimizer.cpp).
#include "optim/adamw.h"

namespace mptrain {

AdamW::AdamW(const ParamTable& table, const AdamWHyper& hyper, Backend& be)
    : Optimizer(table, {"exp_avg", "exp_avg_sq"}, be), hyper_(hyper) {}

void AdamW::step(float* params, const float* grads, float lr, int64_t t, float grad_scale) {
  if (table_.total() == 0) return;
  be_.adamw({.params = whole(params),
             .grads = whole(grads),
             .m = whole(m().data()),
             .v = whole(v().data()),
             .lr = lr,
             .beta1 = hyper_.beta1,
             .beta2 = hyper_.beta2,
             .eps = hyper_.eps,
             .weight_decay = hyper_.weight_decay,
             .t = t,
             .grad_scale = grad_scale,
             .decay_mask = decay_mask()});
}

}  // namespace mptrain
