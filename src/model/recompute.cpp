// --recompute's names and what each family refills (model/recompute.h).
#include "model/recompute.h"

#include <sstream>

#include "core/error.h"
#include "core/named.h"

namespace mptrain {

namespace {
constexpr NameTable<Recompute, 5> kRecomputeNames{{{Recompute::Gelu, "gelu"},
                                                   {Recompute::Norm, "norm"},
                                                   {Recompute::Attention, "attention"},
                                                   {Recompute::Mlp, "mlp"},
                                                   {Recompute::Block, "block"}}};
constexpr const char* kExpected = "expected none or a comma list of gelu, norm, attention, mlp, block";

// Why a family refills no `r`, or null when it does.
const char* missing(Recompute r, RecomputeFamily family) {
  if (family == RecomputeFamily::Llama && r == Recompute::Gelu)
    return "Llama's MLP activation is not GELU; --recompute mlp recomputes the activation with its input "
           "product";
  if (family == RecomputeFamily::Bert && (r == Recompute::Norm || r == Recompute::Block))
    return "BERT's LayerNorm outputs are its residual stream (post-LN), which the next layer reads; BERT "
           "recomputes gelu, attention and mlp";
  return nullptr;
}
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

void check_recompute(RecomputeSet set, RecomputeFamily family) {
  for (const auto& [r, name] : kRecomputeNames)
    if (set.has(r))
      if (const char* why = missing(r, family))
        throw Error("--recompute " + recompute_name(set) + ": " + why);
}

std::vector<RecomputeSet> recompute_singles(RecomputeFamily family) {
  std::vector<RecomputeSet> out = {RecomputeSet{}};
  for (const auto& [r, name] : kRecomputeNames)
    if (!missing(r, family)) out.push_back(RecomputeSet{}.with(r));
  return out;
}

std::vector<RecomputeSet> recompute_sets_by_cost(RecomputeFamily family) {
  const RecomputeSet none, gelu = none.with(Recompute::Gelu), norm = none.with(Recompute::Norm),
                           mlp = none.with(Recompute::Mlp);
  std::vector<RecomputeSet> out;
  const RecomputeSet att = none.with(Recompute::Attention), elementwise = gelu.with(Recompute::Norm);
  for (const RecomputeSet s :
       {none, gelu, norm, elementwise, att, elementwise.with(Recompute::Attention), mlp.with(Recompute::Norm),
        mlp.with(Recompute::Norm).with(Recompute::Attention), none.with(Recompute::Block)}) {
    bool refilled = true;
    for (const auto& [r, name] : kRecomputeNames) refilled = refilled && !(s.has(r) && missing(r, family));
    if (refilled) out.push_back(s);
  }
  return out;
}

std::string recompute_name(RecomputeSet set) {
  if (set.none()) return "none";
  std::string out;
  for (const auto& [r, name] : kRecomputeNames)
    if (set.has(r)) out += (out.empty() ? "" : ",") + std::string(name);
  return out;
}

}  // namespace mptrain
