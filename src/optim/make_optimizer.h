// Builds the optimizer a run asks for (--optimizer adamw|sophia|muon) behind the common
// Optimizer interface, so the trainer and the benchmark need not know which it is.
#pragma once
#include <cstdint>
#include <memory>

#include "core/param_table.h"
#include "optim/adamw.h"
#include "optim/muon.h"
#include "optim/optimizer.h"
#include "optim/sophia.h"

namespace mptrain {

// tokens_per_step (b in Sophia's ρ·b·h) and seed (Sophia's label sampling) are Sophia's only.
// be: the backend the update runs on (the model's). Muon's AdamW group uses `adamw`.
std::unique_ptr<Optimizer> make_optimizer(OptimizerKind kind, const ParamTable& table,
                                          const AdamWHyper& adamw, const SophiaHyper& sophia,
                                          double tokens_per_step, uint64_t seed, Backend& be,
                                          const MuonHyper& muon = {});

}  // namespace mptrain
