// Hugging Face model folders (config.json + model.safetensors), independent of any one model.
//
// A model family plugs in with an HfNameMap: how its tensor names may be spelled in files
// written by Hugging Face (an optional prefix such as "transformer." or "bert.", old
// spellings such as LayerNorm "gamma"/"beta", buffers to skip such as GPT-2's causal-mask
// "h.N.attn.bias", and tied copies such as "lm_head.weight" that must equal their source).
// load_hf_params() then fills a flat parameter buffer laid out by the model's ParamTable,
// whose names are the Hugging Face names; every tensor of the file is accounted for
// (loaded, ignored or checked as a tied copy) or the load fails with one clear Error.
//
// Tensors may be stored as F32, F16 or BF16; they are converted to fp32 exactly.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/param_table.h"
#include "io/safetensors.h"

namespace mptrain {

inline constexpr const char* kHfConfigFile = "config.json";
inline constexpr const char* kHfModelFile = "model.safetensors";

struct HfNameMap {
  std::string architecture;  // e.g. "GPT2LMHeadModel": what config.json's "architectures" names
  // Optional leading prefix: "transformer.h.0.ln_1.weight" and "h.0.ln_1.weight" are the same
  // tensor. Names in the ParamTable go through the same canonicalisation.
  std::string optional_prefix;
  // Old spellings of a name's last component, rewritten on import: {"gamma", "weight"}.
  std::vector<std::pair<std::string, std::string>> renamed_suffixes;
  // Canonical names of buffers that are not parameters (skipped on import); '#' matches a
  // layer index (one or more digits): "h.#.attn.bias".
  std::vector<std::string> ignored;
  // {copy, source}: a tensor that, when present, must equal the source parameter (tied weights).
  std::vector<std::pair<std::string, std::string>> tied;
  // Tied copies (first names of `tied`) that are read AS their source when the file lacks the
  // source: PyTorch's load_state_dict writes either name into the one shared tensor, so a file
  // holding only BERT's cls.predictions.decoder.bias loads in Hugging Face too.
  std::vector<std::string> stand_ins = {};
};

// True when `name` matches `pattern`, where '#' stands for one or more decimal digits.
bool hf_name_matches(const std::string& name, const std::string& pattern);
// The name without the map's optional prefix and with old suffixes rewritten.
std::string hf_canonical_name(const std::string& name, const HfNameMap& map);

// Copies tensor `t` of `file` into dst (numel floats) as fp32 after checking that its shape is
// `shape`; F32, F16 and BF16 are accepted. Errors name the file, the tensor and both shapes.
void hf_read_f32(const SafetensorsFile& file, const TensorView& t, std::span<const int64_t> shape,
                 float* dst);

// What load_hf_params found besides the parameters.
struct HfLoadReport {
  std::vector<std::string> ignored;      // buffers skipped (names as in the file)
  std::vector<std::string> tied_copies;  // tied copies present and equal to their source
  std::vector<std::string> stand_ins;    // tied copies read as their absent source (names as in the file)
  std::map<std::string, size_t> dtypes;  // stored dtype name of the parameters → how many
};

// A model config sizes the parameter table and buffer, so before either is built the file
// that should hold the weights must be able to: every layer has at least one tensor, and
// every parameter element takes at least 2 bytes (F16/BF16). Otherwise a config (config.json,
// or a checkpoint's mptrain_config) claiming 10^6 layers or a 600 GB model had the reader
// build millions of table entries or allocate and zero the buffer before finding the tensors
// missing (hardening audit). `config_source` names the config in the error.
void check_layers_fit(const SafetensorsFile& file, int n_layer, const std::string& config_source);
void check_params_fit(const SafetensorsFile& file, const ParamTable& table, const std::string& config_source);

// Fills params (table.total() floats) from the file: every spec's hf_shape is read into its slot
// and the rest of the slot (padding, e.g. wte's rows beyond V) is zeroed. Throws Error for a
// missing parameter, a wrong shape, a name present twice (with and without the prefix), a
// tensor the map does not know, or a tied copy that differs from its source. A stand-in copy
// (HfNameMap::stand_ins) fills its source's slot when the source is absent.
HfLoadReport load_hf_params(const SafetensorsFile& file, const HfNameMap& map, const ParamTable& table,
                            float* params);

// dir/config.json parsed as a JSON object; throws Error naming the file when it is missing,
// unreadable, not JSON or not an object.
nlohmann::json read_hf_config(const std::string& dir);

// Typed config.json fields with errors that name the file and the field. `what` names the file.
int hf_config_int(const nlohmann::json& cfg, const char* key, const std::string& what);
// The first of `keys` that is present (e.g. {"n_positions", "n_ctx"}).
int hf_config_int_any(const nlohmann::json& cfg, std::initializer_list<const char*> keys,
                      const std::string& what);
double hf_config_number(const nlohmann::json& cfg, const char* key, double fallback, const std::string& what);
std::string hf_config_string(const nlohmann::json& cfg, const char* key, const std::string& fallback,
                             const std::string& what);
bool hf_config_bool(const nlohmann::json& cfg, const char* key, bool fallback, const std::string& what);
// config.json's "architectures", where present, must name a class the family reads (`known` of its
// name); else Error "<what>: architectures [...] name no <expected>".
void hf_check_architectures(const nlohmann::json& cfg, bool (*known)(const std::string&), const std::string& what,
                            const std::string& expected);
// A config read from `what`, checked by its family's validate(): its Error prefixed with `what`.
template <class Config>
Config hf_validated(Config c, const std::string& what) {
  try {
    validate(c);
  } catch (const std::exception& e) {
    throw Error(what + ": " + e.what());
  }
  return c;
}

}  // namespace mptrain
