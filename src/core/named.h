// Options whose values are names (--device cpu, --dist-backend nccl, --graphs on) read once into
// enums: one table of (value, name) per enum, and these two helpers for every table, so that a bad
// name fails where the command line is read with one message listing the accepted names, and
// nothing past the CLI holds an option as a string.
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace mptrain {

template <class E, std::size_t N>
using NameTable = std::array<std::pair<E, const char*>, N>;

template <class E, std::size_t N>
constexpr const char* name_in(const NameTable<E, N>& table, E value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "?";
}

// The value named `name`, or Error "unknown <what> 'x' (expected a, b or c)".
template <class E, std::size_t N>
E parse_in(const NameTable<E, N>& table, std::string_view name, std::string_view what) {
  for (const auto& [v, n] : table)
    if (name == n) return v;
  std::string expected;
  for (std::size_t i = 0; i < N; ++i)
    expected += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + table[i].second;
  throw Error("unknown " + std::string(what) + " '" + std::string(name) + "' (expected " + expected + ")");
}

// An on/off option whose default decides by the run (--overlap-grad-reduce).
enum class Toggle { Auto, On, Off };
inline constexpr NameTable<Toggle, 3> kToggleNames{{{Toggle::Auto, "auto"}, {Toggle::On, "on"}, {Toggle::Off, "off"}}};
inline const char* toggle_name(Toggle t) { return name_in(kToggleNames, t); }
// `dflt` decides Auto.
inline bool toggle_on(Toggle t, bool dflt) { return t == Toggle::Auto ? dflt : t == Toggle::On; }

}  // namespace mptrain
