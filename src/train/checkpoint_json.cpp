// The JSON a checkpoint carries that mptrain reads back: state.json (TrainState) and the
// "mptrain_config" metadata of model.safetensors (Gpt2Config). Kept apart from checkpoint.cpp
// so that these parsers link without the model (fuzz/checkpoint_state_fuzz.cpp,
// fuzz/model_config_fuzz.cpp).
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "train/checkpoint.h"

namespace mptrain {

namespace {

nlohmann::json parse_json(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + " is not valid JSON: " + e.what());
  }
}

// A field as T. Numbers are range-checked here because nlohmann's get<T>() converts with a plain
// static_cast: 1e300 read as an int64 is undefined behaviour (found by fuzz_checkpoint_state),
// and -1 read as a uint64 silently becomes 2^64 - 1.
template <typename T>
T json_get(const nlohmann::json& j, const char* key, const std::string& what) {
  if (!j.is_object() || !j.contains(key)) throw Error(what + ": missing field '" + key + "'");
  const nlohmann::json& v = j.at(key);
  if constexpr (std::is_integral_v<T>) {
    const bool fits = v.is_number_unsigned()  ? std::in_range<T>(v.get<uint64_t>())
                      : v.is_number_integer() ? std::in_range<T>(v.get<int64_t>())
                                              : false;
    if (!fits)
      throw Error(what + ": field '" + key + "' must be an integer in [" + std::to_string(std::numeric_limits<T>::min()) +
                  ", " + std::to_string(std::numeric_limits<T>::max()) + "], not " + v.dump());
    return v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>()) : static_cast<T>(v.get<int64_t>());
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number() || !(std::fabs(v.get<double>()) <= std::numeric_limits<T>::max()))
      throw Error(what + ": field '" + key + "' must be a finite number, not " + v.dump());
    return static_cast<T>(v.get<double>());
  } else {
    try {
      return v.get<T>();
    } catch (const nlohmann::json::exception&) {
      throw Error(what + ": field '" + key + "' has the wrong type");
    }
  }
}

}  // namespace

Gpt2Config parse_checkpoint_config(const std::string& text, const std::string& what) {
  nlohmann::json j = parse_json(text, what);
  Gpt2Config c;
  c.block_size = json_get<int>(j, "block_size", what);
  c.vocab_size = json_get<int>(j, "vocab_size", what);
  c.padded_vocab_size = json_get<int>(j, "padded_vocab_size", what);
  c.n_layer = json_get<int>(j, "n_layer", what);
  c.n_head = json_get<int>(j, "n_head", what);
  c.n_embd = json_get<int>(j, "n_embd", what);
  if (j.contains("ln_eps")) c.ln_eps = json_get<float>(j, "ln_eps", what);  // older checkpoints: the default
  if (j.contains("init_std")) c.init_std = json_get<float>(j, "init_std", what);
  validate(c);
  return c;
}

TrainState parse_checkpoint_state(const std::string& text, const std::string& what) {
  nlohmann::json j = parse_json(text, what);
  TrainState s;
  s.step = json_get<int64_t>(j, "step", what);
  s.train_pos.shard = json_get<int64_t>(j, "train_shard", what);
  s.train_pos.offset = json_get<int64_t>(j, "train_offset", what);
  s.train_pos.epoch = json_get<int64_t>(j, "train_epoch", what);
  s.seed = json_get<uint64_t>(j, "seed", what);
  s.sample_counter = json_get<uint64_t>(j, "sample_counter", what);
  if (j.contains("options")) s.options = j["options"];
  if (j.contains("precision")) {  // older checkpoints and imported ones: fp32
    s.precision = json_get<std::string>(j, "precision", what);
    try {
      parse_precision(s.precision);
    } catch (const Error& e) {
      throw Error(what + ": " + e.what());
    }
  }
  if (j.contains("loss_scaler")) {
    const nlohmann::json& ls = j["loss_scaler"];
    const std::string lwhat = what + " loss_scaler";
    s.has_loss_scaler = true;
    s.loss_scale = json_get<float>(ls, "scale", lwhat);
    s.growth_tracker = json_get<int>(ls, "growth_tracker", lwhat);
    s.skipped_steps = json_get<int64_t>(ls, "skipped_steps", lwhat);
    MPT_CHECK(std::isfinite(s.loss_scale) && s.loss_scale > 0.0f && s.growth_tracker >= 0 && s.skipped_steps >= 0,
              lwhat + ": scale must be finite and positive, growth_tracker and skipped_steps non-negative");
  }
  if (j.contains("lr_scale")) {  // --on-nan rollback (train/numeric_guard.h); older checkpoints: 1
    s.lr_scale = json_get<float>(j, "lr_scale", what);
    MPT_CHECK(std::isfinite(s.lr_scale) && s.lr_scale > 0.0f && s.lr_scale <= 1.0f,
              what + ": lr_scale must be in (0, 1]");
  }
  if (j.contains("nan_rollbacks")) {
    s.nan_rollbacks = json_get<int>(j, "nan_rollbacks", what);
    MPT_CHECK(s.nan_rollbacks >= 0, what + ": nan_rollbacks must be >= 0");
  }
  return s;
}

}  // namespace mptrain
