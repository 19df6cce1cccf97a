// A model family's named presets: one table of shapes per family (model/gpt2_config.cpp,
// bert_config.cpp, llama_config.cpp), looked up and listed the same way for each.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace mptrain {

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
