// AdamW over a parameter table: the per-tensor rules (which tensors decay) over the backend's
// adamw op, whose CPU kernel is backend/cpu/optimizer.cpp.
#include "optim/adamw.h"

namespace mptrain {

AdamW::AdamW(const ParamTable& table, const AdamWHyper& hyper, Backend& be)
    : Optimizer(table, {"exp_avg", "exp_avg_sq"}, be), hyper_(hyper) {}

void AdamW::step(float* params, const float* grads, float lr, int64_t t, float grad_scale) {
  for (const auto& spec : table_.specs())
    be_.adamw({.params = flat(params, spec),
               .grads = flat(grads, spec),
               .m = flat(m().data(), spec),
               .v = flat(v().data(), spec),
               .lr = lr,
               .beta1 = hyper_.beta1,
               .beta2 = hyper_.beta2,
               .eps = hyper_.eps,
               .weight_decay = spec.decay ? hyper_.weight_decay : 0.0f,
               .t = t,
               .grad_scale = grad_scale});
}

}  // namespace mptrain
