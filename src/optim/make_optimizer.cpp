// The optimizer factory.
#include "optim/make_optimizer.h"

namespace mptrain {

std::unique_ptr<Optimizer> make_optimizer(OptimizerKind kind, const ParamTable& table,
                                          const AdamWHyper& adamw, const SophiaHyper& sophia,
                                          double tokens_per_step, uint64_t seed, Backend& be,
                                          const MuonHyper& muon) {
  switch (kind) {
    case OptimizerKind::AdamW:
      return std::make_unique<AdamW>(table, adamw, be);
    case OptimizerKind::Sophia:
      return std::make_unique<Sophia>(table, sophia, tokens_per_step, seed, be);
    case OptimizerKind::Muon:
      return std::make_unique<Muon>(table, muon, adamw, be);
  }
  return nullptr;
}

}  // namespace mptrain
