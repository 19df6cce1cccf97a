// Checked reads of checkpoint JSON, shared by every reader of a checkpoint's state.json and
// config metadata (train/checkpoint_json.cpp for GPT-2 and the run state,
// train/bert_checkpoint.cpp for BERT): malformed text, a missing field, a field of the wrong
// type or a number out of its type's range is one mptrain::Error, never an nlohmann exception
// or undefined behaviour. Header-only, so that the fuzz targets' parser library links it
// without the model.
#pragma once
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mptrain {

inline nlohmann::json parse_json(const std::string& text, const std::string& what) {
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
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) throw Error(what + ": field '" + key + "' must be true or false, not " + v.dump());
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
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

}  // namespace mptrain
