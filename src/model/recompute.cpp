// --recompute's names (model/recompute.h).
#include "model/recompute.h"

#include <sstream>

#include "core/error.h"
#include "core/named.h"

namespace mptrain {

namespace {
constexpr NameTable<Recompute, 4> kRecomputeNames{
    {{Recompute::Gelu, "gelu"}, {Recompute::Norm, "norm"}, {Recompute::Mlp, "mlp"}, {Recompute::Block, "block"}}};
constexpr const char* kExpected = "expected none or a comma list of gelu, norm, mlp, block";
}  // namespace

RecomputeSet parse_recompute(const std::string& text) {
  if (text == "none") return {};
  if (text.empty() || text.front() == ',' || text.back() == ',')
    throw Error("--recompute '" + text + "': " + kExpected);
  RecomputeSet set;
  std::stringstream in(text);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name == "none") throw Error("--recompute '" + text + "': none stands alone, not in a list");
    set = set.with(parse_in(kRecomputeNames, name, "--recompute choice"));
  }
  if (set.none()) throw Error("--recompute '" + text + "': " + kExpected);
  return set;
}

void refuse_recompute(RecomputeSet set, const char* family) {
  if (!set.none())
    throw Error("--recompute " + recompute_name(set) + ": " + family + " keeps every activation so far (GPT-2 and Llama recompute)");
}

void refuse_gelu_recompute(RecomputeSet set, const char* family) {
  if (set.has(Recompute::Gelu))
    throw Error(std::string("--recompute ") + recompute_name(set) + ": " + family +
                "'s MLP activation is not GELU; --recompute mlp recomputes the activation with its input product");
}

std::vector<RecomputeSet> recompute_sets_by_cost(bool with_gelu) {
  const RecomputeSet none, gelu = none.with(Recompute::Gelu), norm = none.with(Recompute::Norm),
                     mlp = none.with(Recompute::Mlp);
  if (!with_gelu) return {none, norm, mlp, mlp.with(Recompute::Norm), none.with(Recompute::Block)};
  return {none, gelu, norm, gelu.with(Recompute::Norm), mlp, mlp.with(Recompute::Norm), none.with(Recompute::Block)};
}

std::string recompute_name(RecomputeSet set) {
  if (set.none()) return "none";
  std::string out;
  for (const auto& [r, name] : kRecomputeNames)
    if (set.has(r)) out += (out.empty() ? "" : ",") + std::string(name);
  return out;
}

}  // namespace mptrain
