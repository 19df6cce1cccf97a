// Reading Hugging Face model folders: name canonicalisation, dtype conversion, config fields.
#include "io/hf_folder.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/dtype.h"
#include "core/error.h"
#include "io/fileutil.h"

namespace mptrain {

namespace {

std::string join_names(const std::vector<std::string>& names, size_t max_shown) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < max_shown; ++i) out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > max_shown) out += " and " + std::to_string(names.size() - max_shown) + " more";
  return out;
}

const nlohmann::json* find_field(const nlohmann::json& cfg, const char* key) {
  auto it = cfg.find(key);
  return it == cfg.end() ? nullptr : &*it;
}

}  // namespace

bool hf_name_matches(const std::string& name, const std::string& pattern) {
  size_t i = 0, p = 0;
  while (p < pattern.size()) {
    if (pattern[p] == '#') {
      const size_t start = i;
      while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
      if (i == start) return false;
      ++p;
    } else {
      if (i >= name.size() || name[i] != pattern[p]) return false;
      ++i, ++p;
    }
  }
  return i == name.size();
}

std::string hf_canonical_name(const std::string& name, const HfNameMap& map) {
  std::string out = name;
  if (!map.optional_prefix.empty() && out.rfind(map.optional_prefix, 0) == 0)
    out.erase(0, map.optional_prefix.size());
  for (const auto& [old_suffix, new_suffix] : map.renamed_suffixes) {
    const std::string dotted = "." + old_suffix;
    if (out.size() > dotted.size() && out.compare(out.size() - dotted.size(), dotted.size(), dotted) == 0) {
      out.replace(out.size() - old_suffix.size(), old_suffix.size(), new_suffix);
      break;
    }
  }
  return out;
}

void hf_read_f32(const SafetensorsFile& file, const TensorView& t, std::span<const int64_t> shape,
                 float* dst) {
  const std::string where = "'" + file.path() + "': tensor '" + t.name + "'";
  if (!std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end()))
    throw Error(where + " has shape " + shape_string(t.shape) + ", expected " + shape_string(shape));
  const size_t n = t.numel();
  switch (t.dtype) {
    case DType::F32:
      if (n > 0) std::memcpy(dst, t.data, n * sizeof(float));  // the mapping may be unaligned
      return;
    case DType::BF16:
    case DType::F16: {
      const bool bf16 = t.dtype == DType::BF16;
#pragma omp parallel for schedule(static)
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        dst[i] = bf16 ? bf16_to_f32(Bf16{h}) : f16_to_f32(Fp16{h});
      }
      return;
    }
    default:
      throw Error(where + " is " + dtype_name(t.dtype) + "; only F32, F16 and BF16 weights can be imported");
  }
}

void check_layers_fit(const SafetensorsFile& file, int n_layer, const std::string& config_source) {
  MPT_CHECK(n_layer >= 0 && static_cast<size_t>(n_layer) <= file.names().size(),
            config_source + " describes " + std::to_string(n_layer) + " layers but '" + file.path() +
                "' holds only " + std::to_string(file.names().size()) + " tensors");
}

void check_params_fit(const SafetensorsFile& file, const ParamTable& table, const std::string& config_source) {
  double stored = 0.0, wanted = 0.0;  // double: a config's shapes may overflow size_t products
  for (const auto& name : file.names()) stored += static_cast<double>(file.get(name).nbytes);
  for (const auto& spec : table.specs()) {
    double n = 1.0;
    for (int64_t d : spec.hf_shape) n *= static_cast<double>(d);
    wanted += n;
  }
  MPT_CHECK(2.0 * wanted <= stored, config_source + " describes " +
                                        std::to_string(static_cast<uint64_t>(std::min(wanted, 1e19))) +
                                        " parameters but '" + file.path() + "' holds only " +
                                        std::to_string(static_cast<uint64_t>(stored)) + " bytes of tensors");
}

HfLoadReport load_hf_params(const SafetensorsFile& file, const HfNameMap& map, const ParamTable& table,
                            float* params) {
  const std::string where = "'" + file.path() + "'";
  // Canonical name → tensor in the file.
  std::map<std::string, const TensorView*> present;
  for (const auto& name : file.names()) {
    const TensorView& t = file.get(name);
    auto [it, inserted] = present.emplace(hf_canonical_name(name, map), &t);
    if (!inserted)
      throw Error(where + ": tensors '" + it->second->name + "' and '" + name + "' are the same parameter '" +
                  it->first + "'; keep one of them");
  }

  std::map<std::string, const ParamSpec*> wanted;
  for (const auto& spec : table.specs()) wanted.emplace(hf_canonical_name(spec.name, map), &spec);

  HfLoadReport report;
  // A stand-in copy takes its source's place when the file has only the copy.
  for (const auto& [copy, source] : map.tied) {
    if (std::find(map.stand_ins.begin(), map.stand_ins.end(), copy) == map.stand_ins.end()) continue;
    const std::string source_name = hf_canonical_name(source, map);
    auto it = present.find(copy);
    if (it == present.end() || present.count(source_name)) continue;
    report.stand_ins.push_back(it->second->name);
    present.emplace(source_name, it->second);
    present.erase(it);
  }

  std::vector<std::string> missing;
  for (const auto& [canonical, spec] : wanted)
    if (!present.count(canonical)) missing.push_back(spec->name);
  if (!missing.empty())
    throw Error(where + ": missing tensor" + (missing.size() > 1 ? "s " : " ") + join_names(missing, 4) +
                " of " + map.architecture +
                (map.optional_prefix.empty()
                     ? std::string()
                     : " (with or without the '" + map.optional_prefix + "' prefix)"));

  std::vector<std::string> unexpected;
  std::vector<std::pair<const TensorView*, const ParamSpec*>> tied;
  for (const auto& entry : present) {
    // Named, not a structured binding: clang 14 (the fuzz build) cannot capture bindings in lambdas.
    const std::string& canonical = entry.first;
    const TensorView* t = entry.second;
    if (wanted.count(canonical)) continue;
    auto is_ignored = [&](const std::string& p) { return hf_name_matches(canonical, p); };
    if (std::any_of(map.ignored.begin(), map.ignored.end(), is_ignored)) {
      report.ignored.push_back(t->name);
      continue;
    }
    auto copy =
        std::find_if(map.tied.begin(), map.tied.end(), [&](const auto& c) { return c.first == canonical; });
    if (copy != map.tied.end()) {
      tied.emplace_back(t, wanted.at(hf_canonical_name(copy->second, map)));
      continue;
    }
    unexpected.push_back(t->name);
  }
  if (!unexpected.empty())
    throw Error(where + ": unexpected tensor" + (unexpected.size() > 1 ? "s " : " ") +
                join_names(unexpected, 4) + ", not part of " + map.architecture);

  for (const auto& spec : table.specs()) {
    float* slot = params + spec.offset;
    std::fill(slot, slot + spec.numel, 0.0f);
    const TensorView& t = *present.at(hf_canonical_name(spec.name, map));
    hf_read_f32(file, t, spec.hf_shape, slot);
    ++report.dtypes[dtype_name(t.dtype)];
  }

  for (const auto& [t, source] : tied) {
    std::vector<float> copy(source->hf_numel());
    hf_read_f32(file, *t, source->hf_shape, copy.data());
    if (std::memcmp(copy.data(), params + source->offset, copy.size() * sizeof(float)) != 0)
      throw Error(where + ": '" + t->name + "' differs from '" + source->name + "'; mptrain ties them (" +
                  map.architecture + " with tie_word_embeddings), so an untied head cannot be imported");
    report.tied_copies.push_back(t->name);
  }
  return report;
}

nlohmann::json read_hf_config(const std::string& dir) {
  const std::string path = dir + "/" + kHfConfigFile;
  if (!std::filesystem::exists(path))
    throw Error("'" + path +
                "' not found: a Hugging Face model folder holds config.json and model.safetensors");
  nlohmann::json cfg;
  try {
    cfg = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error("'" + path + "' is not valid JSON: " + e.what());
  }
  if (!cfg.is_object()) throw Error("'" + path + "' is not a JSON object");
  return cfg;
}

int hf_config_int(const nlohmann::json& cfg, const char* key, const std::string& what) {
  const nlohmann::json* v = find_field(cfg, key);
  if (!v) throw Error(what + ": missing field '" + key + "'");
  if (!v->is_number_integer() || v->get<int64_t>() <= 0 || v->get<int64_t>() > (int64_t{1} << 30))
    throw Error(what + ": field '" + key + "' must be a positive integer, not " + v->dump());
  return static_cast<int>(v->get<int64_t>());
}

int hf_config_int_any(const nlohmann::json& cfg, std::initializer_list<const char*> keys,
                      const std::string& what) {
  std::string tried;
  for (const char* key : keys) {
    if (find_field(cfg, key)) return hf_config_int(cfg, key, what);
    tried += std::string(tried.empty() ? "'" : " or '") + key + "'";
  }
  throw Error(what + ": missing field " + tried);
}

double hf_config_number(const nlohmann::json& cfg, const char* key, double fallback,
                        const std::string& what) {
  const nlohmann::json* v = find_field(cfg, key);
  if (!v) return fallback;
  if (!v->is_number()) throw Error(what + ": field '" + key + "' must be a number, not " + v->dump());
  return v->get<double>();
}

std::string hf_config_string(const nlohmann::json& cfg, const char* key, const std::string& fallback,
                             const std::string& what) {
  const nlohmann::json* v = find_field(cfg, key);
  if (!v) return fallback;
  if (!v->is_string()) throw Error(what + ": field '" + key + "' must be a string, not " + v->dump());
  return v->get<std::string>();
}

bool hf_config_bool(const nlohmann::json& cfg, const char* key, bool fallback, const std::string& what) {
  const nlohmann::json* v = find_field(cfg, key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw Error(what + ": field '" + key + "' must be true or false, not " + v->dump());
  return v->get<bool>();
}

void hf_check_architectures(const nlohmann::json& cfg, bool (*known)(const std::string&), const std::string& what,
                            const std::string& expected) {
  const auto it = cfg.find("architectures");
  if (it == cfg.end() || it->is_null()) return;
  bool any = false;
  if (it->is_array())
    for (const auto& a : *it) any |= a.is_string() && known(a.get<std::string>());
  MPT_CHECK(any, what + ": architectures " + it->dump() + " name no " + expected);
}

}  // namespace mptrain
