// A model family's named presets: one table of shapes per family (model/gpt2_config.cpp,
// bert_config.cpp, llama_config.cpp), looked up and listed the same way for each.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/named.h"

namespace mptrain {

// The model families (--model of train and bench), each with its presets, config and model.
enum class ModelFamily { Gpt2, Llama, Bert };
inline constexpr NameTable<ModelFamily, 3> kModelFamilyNames{
    {{ModelFamily::Gpt2, "gpt2"}, {ModelFamily::Llama, "llama"}, {ModelFamily::Bert, "bert"}}};
inline ModelFamily parse_model_family(std::string_view name) { return parse_in(kModelFamilyNames, name, "--model"); }
inline const char* model_family_name(ModelFamily f) { return name_in(kModelFamilyNames, f); }

// The table's names, in its (alphabetical) order.
template <class Shape>
std::vector<std::string> preset_names(const std::map<std::string, Shape>& table) {
  std::vector<std::string> names;
  for (const auto& [name, shape] : table) names.push_back(name);
  return names;
}

// The shape of preset `name`; Error "unknown <family> preset 'name' (known: ...)" otherwise.
template <class Shape>
const Shape& preset_shape(const std::map<std::string, Shape>& table, const std::string& name,
                          const std::string& family) {
  const auto it = table.find(name);
  if (it != table.end()) return it->second;
  std::string known;
  for (const auto& n : preset_names(table)) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown " + family + " preset '" + name + "' (known: " + known + ")");
}

}  // namespace mptrain
