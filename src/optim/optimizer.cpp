// Optimizer names and the state allocation shared by every optimizer.
#include "optim/optimizer.h"

#include "core/error.h"
#include "core/named.h"

namespace mptrain {

namespace {
constexpr NameTable<OptimizerKind, 3> kOptimizerNames{
    {{OptimizerKind::AdamW, "adamw"}, {OptimizerKind::Sophia, "sophia"}, {OptimizerKind::Muon, "muon"}}};
}  // namespace

const char* optimizer_name(OptimizerKind kind) { return name_in(kOptimizerNames, kind); }

OptimizerKind parse_optimizer_kind(const std::string& name) { return parse_in(kOptimizerNames, name, "optimizer"); }

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
