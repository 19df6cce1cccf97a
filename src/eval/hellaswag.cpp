// HellaSwag-format jsonl reading (see hellaswag.h): one JSON object per line, each field
// checked with an error that names the file and the line.
#include "eval/hellaswag.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace mptrain {

namespace {

std::string string_field(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw Error(where + ": missing field '" + key + "'");
  if (!it->is_string()) throw Error(where + ": field '" + key + "' must be a string, not " + it->dump());
  return it->get<std::string>();
}

int label_field(const nlohmann::json& j, size_t n_endings, const std::string& where) {
  auto it = j.find("label");
  if (it == j.end()) throw Error(where + ": missing field 'label'");
  int64_t label = -1;
  bool ok = false;
  if (it->is_number_integer()) {
    label = it->get<int64_t>();
    ok = true;
  } else if (it->is_string()) {  // some copies of the data set store the label as "0".."3"
    const std::string s = it->get<std::string>();
    ok = !s.empty() && s.size() < 10 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (ok) label = std::stoll(s);
  }
  if (!ok) throw Error(where + ": 'label' must be an integer, not " + it->dump());
  if (label < 0 || label >= static_cast<int64_t>(n_endings))
    throw Error(where + ": label " + std::to_string(label) + " is out of range 0.." +
                std::to_string(n_endings - 1));
  return static_cast<int>(label);
}

}  // namespace

std::vector<McExample> read_hellaswag(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error("cannot read '" + path + "': " + std::strerror(errno));
  return parse_hellaswag(text.str(), path);
}

std::vector<McExample> parse_hellaswag(std::string_view text, const std::string& path) {
  std::vector<McExample> out;
  int64_t n = 0;
  for (size_t pos = 0; pos < text.size();) {
    ++n;
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = "'" + path + "' line " + std::to_string(n);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw Error(where + ": not valid JSON (syntax error at column " + std::to_string(e.byte) + ")");
    } catch (const nlohmann::json::exception& e) {
      // Not only syntax errors: a number such as 1e18446744073709551616 throws out_of_range
      // (found by fuzz_hellaswag; it used to escape as a non-mptrain exception).
      throw Error(where + ": not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw Error(where + ": not a JSON object");
    McExample ex;
    ex.line = n;
    if (j.contains("ctx")) {
      ex.context = string_field(j, "ctx", where);
    } else if (j.contains("ctx_a")) {
      ex.context = string_field(j, "ctx_a", where);
      const std::string b = string_field(j, "ctx_b", where);
      if (!b.empty()) ex.context += " " + b;
    } else {
      throw Error(where + ": missing field 'ctx' (or 'ctx_a' and 'ctx_b')");
    }
    auto endings = j.find("endings");
    if (endings == j.end()) throw Error(where + ": missing field 'endings'");
    if (!endings->is_array() || endings->size() != 4)
      throw Error(where + ": 'endings' must be a list of 4 strings, found " +
                  (endings->is_array() ? std::to_string(endings->size()) + " entries" : endings->dump()));
    for (const auto& e : *endings) {
      if (!e.is_string()) throw Error(where + ": 'endings' must be a list of 4 strings, found " + e.dump());
      ex.endings.push_back(e.get<std::string>());
    }
    ex.label = label_field(j, ex.endings.size(), where);
    out.push_back(std::move(ex));
  }
  if (out.empty()) throw Error("'" + path + "' holds no examples");
  return out;
}

}  // namespace mptrain
