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
    case OptimizerKind::Muon:
      return "muon";
  }
  return "unknown";
}

OptimizerKind parse_optimizer_kind(const std::string& name) {
  if (name == "adamw") return OptimizerKind::AdamW;
  if (name == "sophia") return OptimizerKind::Sophia;
  if (name == "muon") return OptimizerKind::Muon;
  throw Error("unknown optimizer '" + name + "' (known: adamw, sophia, muon)");
}

bool holds(StateHolds h, const ParamSpec& spec) {
  switch (h) {
    case StateHolds::Matrices:
      return spec.matrix != MatrixLayout::None;
    case StateHolds::NonMatrices:
      return spec.matrix == MatrixLayout::None;
    case StateHolds::All:
      break;
  }
  return true;
}

Optimizer::Optimizer(const ParamTable& table, const std::vector<std::string>& state_prefixes, Backend& be)
    : table_(table), be_(be) {
  state_.reserve(state_prefixes.size());
  for (const auto& prefix : state_prefixes)
    state_.push_back({prefix, FloatBuffer(table.total(), be.memory())});
  std::vector<std::pair<size_t, size_t>> decayed;
  for (const auto& spec : table.specs())
    if (spec.decay) decayed.emplace_back(spec.offset, spec.offset + spec.numel);
  const std::vector<std::uint32_t> bits = decay_mask_bits(table.total(), decayed);
  decay_mask_.resize(bits.size(), be.memory());
  decay_mask_.upload(bits.data(), bits.size());
}

}  // namespace mptrain
