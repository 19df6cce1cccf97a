// Option checks whose failures read as sentences: "--batch: must be at least 1, not 0".
// CLI11's own PositiveNumber / Range print "Value 0 not in range 0.000000 to 1797693...(300
// digits).000000", which names no rule a user can act on. A value that is not a number at all
// passes through here and gets CLI11's conversion error ("--batch: Could not convert: x").
#pragma once
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/named.h"
#include "precision/precision.h"

namespace mptrain::cli {

// "1", "0.99", "2147483647": a bound as written (whole numbers in full, not as "2.14748e+09").
inline std::string bound_text(double v) {
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  else
    std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// The value as a number, or false when it is not one (CLI11 reports that itself).
inline bool parse_number(const std::string& s, double& v) {
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return !s.empty() && end && *end == '\0';
}

// value >= min.
inline CLI::Validator at_least(double min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        double v = 0.0;
        if (!parse_number(s, v) || v >= min) return "";
        return "must be at least " + bound_text(min) + ", not " + s;
      },
      "NUMBER >= " + bound_text(min));
}

// lo <= value <= hi.
inline CLI::Validator between(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        double v = 0.0;
        if (!parse_number(s, v) || (v >= lo && v <= hi)) return "";
        return "must be between " + bound_text(lo) + " and " + bound_text(hi) + ", not " + s;
      },
      "NUMBER in [" + bound_text(lo) + ", " + bound_text(hi) + "]");
}

// An option whose name is read straight into its typed value (an enum, a precision): `parse` is
// the type's own parser, which throws Error naming the accepted values, so a bad name fails as the
// command line is read, with that message, and *target never holds an unchecked string. `names`
// is what --help shows ("{cosine,linear}").
template <class T, class Parse>
CLI::Option* add_named_option(CLI::App* cmd, const std::string& flag, T* target, Parse parse,
                              const std::string& names, const std::string& help,
                              const std::string& default_name = "") {
  CLI::Option* o = cmd->add_option_function<std::string>(
      flag, [target, parse](const std::string& s) { *target = parse(s); }, help);
  o->check(CLI::Validator(
      [parse](std::string& s) -> std::string {
        try {
          parse(s);
          return "";
        } catch (const std::exception& e) {
          return e.what();
        }
      },
      names));
  if (!default_name.empty()) o->default_str(default_name);
  return o;
}

// --precision read into a Precision (eval, generate, fill-mask, predict, explain, bench).
inline CLI::Option* add_precision_option(CLI::App* cmd, Precision* target, const std::string& help) {
  return add_named_option(
      cmd, "--precision", target, [](const std::string& s) { return parse_precision(s); }, "{fp32,tf32,bf16,fp16}",
      help, precision_name(*target));
}

// -b/--batch: a positive number of sequences, or auto (*automatic set, *batch left for the caller).
inline CLI::Option* add_batch_option(CLI::App* cmd, int* batch, bool* automatic, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          "-b,--batch",
          [batch, automatic](const std::string& v) {
            *automatic = v == "auto";
            if (!*automatic) *batch = std::stoi(v);
          },
          help)
      ->default_str(std::to_string(*batch))
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "auto") return "";
            try {
              size_t end = 0;
              const int b = std::stoi(v, &end);
              if (end == v.size()) return b >= 1 ? "" : "must be at least 1, not " + v;
            } catch (const std::exception&) {
            }
            return "expected a number of sequences or auto, not '" + v + "'";
          },
          "INT|auto"));
}

// An on/off option read into a bool (--graphs on): the names "on" and "off", nothing else.
inline CLI::Option* add_on_off_option(CLI::App* cmd, const std::string& flag, bool* target, const std::string& help) {
  static constexpr NameTable<bool, 2> kOnOff{{{true, "on"}, {false, "off"}}};
  return add_named_option(
      cmd, flag, target, [flag](const std::string& s) { return parse_in(kOnOff, s, flag); }, "{on,off}", help,
      *target ? "on" : "off");
}

}  // namespace mptrain::cli
