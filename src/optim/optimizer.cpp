// Optimizer names and the state allocation shared by every optimizer.
#include "optim/optimizer.h"

#include "core/error.h"

namespace mptrain {

const char* optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::AdamW:
      return "adamw";
    case OptimizerKind::Sophia:
      return "sophia";
  }
  return "unknown";
}

OptimizerKind parse_optimizer_kind(const std::string& name) {
  if (name == "adamw") return OptimizerKind::AdamW;
  if (name == "sophia") return OptimizerKind::Sophia;
  throw Error("unknown optimizer '" + name + "' (known: adamw, sophia)");
}

Optimizer::Optimizer(const ParamTable& table, const std::vector<std::string>& state_prefixes, Backend& be)
    : table_(table), be_(be) {
  state_.reserve(state_prefixes.size());
  for (const auto& prefix : state_prefixes)
    state_.push_back({prefix, FloatBuffer(table.total(), be.memory())});
}

}  // namespace mptrain
