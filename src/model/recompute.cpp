// --recompute's names (model/recompute.h).
#include "model/recompute.h"

#include <sstream>

#include "core/error.h"
#include "core/named.h"

namespace mptrain {

namespace {
constexpr NameTable<Recompute, 3> kRecomputeNames{
    {{Recompute::Norm, "norm"}, {Recompute::Mlp, "mlp"}, {Recompute::Block, "block"}}};
}  // namespace

RecomputeSet parse_recompute(const std::string& text) {
  if (text == "none") return {};
  if (text.empty() || text.front() == ',' || text.back() == ',')
    throw Error("--recompute '" + text + "': expected none or a comma list of norm, mlp, block");
  RecomputeSet set;
  std::stringstream in(text);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name == "none") throw Error("--recompute '" + text + "': none stands alone, not in a list");
    set = set.with(parse_in(kRecomputeNames, name, "--recompute choice"));
  }
  if (set.none()) throw Error("--recompute '" + text + "': expected none or a comma list of norm, mlp, block");
  return set;
}

void refuse_recompute(RecomputeSet set, const char* family) {
  if (!set.none())
    throw Error("--recompute " + recompute_name(set) + ": " + family + " keeps every activation so far (GPT-2 recomputes)");
}

std::vector<RecomputeSet> recompute_sets_by_cost() {
  const RecomputeSet none;
  return {none, none.with(Recompute::Norm), none.with(Recompute::Mlp),
          none.with(Recompute::Norm).with(Recompute::Mlp), none.with(Recompute::Block)};
}

std::string recompute_name(RecomputeSet set) {
  if (set.none()) return "none";
  std::string out;
  for (const auto& [r, name] : kRecomputeNames)
    if (set.has(r)) out += (out.empty() ? "" : ",") + std::string(name);
  return out;
}

}  // namespace mptrain
