// Labelled classification examples from TSV or JSONL (data/classify_data.h).
#include "data/classify_data.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <map>

#include "core/error.h"
#include "data/prepare.h"
#include "data/wordpiece.h"

namespace mptrain {

void truncate_longest_first(std::vector<int>& a, std::vector<int>& b, size_t max_tokens) {
  while (a.size() + b.size() > max_tokens) (a.size() > b.size() ? a : b).pop_back();
}

namespace {

// One parsed line: its fields by column name.
using Row = std::map<std::string, std::string>;

bool is_integer(const std::string& s, int* value = nullptr) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return false;
  if (value) *value = v;
  return true;
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out(1);
  for (const char c : line) {
    if (c == '\t')
      out.emplace_back();
    else
      out.back().push_back(c);
  }
  if (!out.back().empty() && out.back().back() == '\r') out.back().pop_back();
  return out;
}

// The rows of a file's text with the line number of each, tab-separated or JSON lines.
std::vector<std::pair<int, Row>> parse_rows(std::string_view text, bool jsonl, const std::string& path, bool header) {
  std::vector<std::pair<int, Row>> rows;
  std::vector<std::string> names;
  size_t at = 0;
  for (int n = 1; at < text.size(); ++n) {
    const size_t nl = std::min(text.find('\n', at), text.size());
    const std::string line(text.substr(at, nl - at));
    at = nl + 1;
    if (line.empty() || line == "\r") continue;
    const std::string where = path + ", line " + std::to_string(n);
    Row row;
    if (jsonl) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        throw Error(where + ": not a JSON object");
      }
      MPT_CHECK(j.is_object(), where + ": not a JSON object");
      for (const auto& [key, value] : j.items()) row[key] = value.is_string() ? value.get<std::string>() : value.dump();
    } else {
      const std::vector<std::string> fields = split_tabs(line);
      if (header && names.empty()) {
        names = fields;
        continue;
      }
      if (names.empty())
        for (size_t i = 0; i < fields.size(); ++i) names.push_back(std::to_string(i));
      MPT_CHECK(fields.size() == names.size(), where + ": " + std::to_string(fields.size()) + " fields, the " +
                                                   (header ? "header names " : "first line has ") +
                                                   std::to_string(names.size()));
      for (size_t i = 0; i < fields.size(); ++i) row[names[i]] = fields[i];
    }
    rows.emplace_back(n, std::move(row));
  }
  MPT_CHECK(!rows.empty(), path + ": no examples");
  return rows;
}

// The text columns of a row: not the label, not a number (ids, indices, quality scores).
std::vector<std::string> text_columns(const Row& row, const std::string& label) {
  std::vector<std::string> out;
  for (const auto& [name, value] : row)
    if (name != label && !is_integer(value)) out.push_back(name);
  return out;
}

int label_of(const std::string& value, const ClassifyReadOptions& opt, const std::string& where) {
  int v = -1;
  if (!is_integer(value, &v)) {
    const auto it = std::find(opt.label_names.begin(), opt.label_names.end(), value);
    MPT_CHECK(it != opt.label_names.end(), where + ": label '" + value + "' is neither a number nor one of the " +
                                               std::to_string(opt.label_names.size()) + " label names");
    v = static_cast<int>(it - opt.label_names.begin());
  }
  MPT_CHECK(v >= 0 && v < opt.num_labels,
            where + ": label " + std::to_string(v) + " is outside [0, " + std::to_string(opt.num_labels) + ")");
  return v;
}

}  // namespace

std::vector<ClassifyExample> read_classify_file(const std::string& path, const WordpieceTokenizer& tok,
                                                const ClassifyReadOptions& opt) {
  const bool jsonl = path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  return parse_classify_text(read_text_file(path), jsonl, path, tok, opt);
}

std::vector<ClassifyExample> parse_classify_text(std::string_view text, bool jsonl, const std::string& path,
                                                 const WordpieceTokenizer& tok, const ClassifyReadOptions& opt) {
  const ClassifyColumns& col = opt.columns;
  const bool pair = !col.text_b.empty();
  MPT_CHECK(opt.max_seq_len >= (pair ? 5 : 3), "classification: --max-seq-len " + std::to_string(opt.max_seq_len) +
                                                   " leaves no room for text");
  const std::vector<std::pair<int, Row>> rows = parse_rows(text, jsonl, path, opt.header);
  const BertSpecialIds& sp = tok.special();
  std::vector<ClassifyExample> out;
  out.reserve(rows.size());
  for (const auto& [n, row] : rows) {
    const std::string where = path + ", line " + std::to_string(n);
    for (const std::string* c : {&col.text, &col.text_b, &col.label})
      MPT_CHECK(c->empty() || row.count(*c), where + ": no column '" + *c + "'");
    if (!pair) {
      const std::vector<std::string> texts = text_columns(row, col.label);
      MPT_CHECK(texts.size() < 2, where + ": two text columns (" + texts[0] + ", " + texts[1] +
                                      ") for a single-sentence task: a pair file (name its second text column)");
    }
    std::vector<int> a = tok.encode(row.at(col.text)), b = pair ? tok.encode(row.at(col.text_b)) : std::vector<int>{};
    truncate_longest_first(a, b, static_cast<size_t>(opt.max_seq_len) - (pair ? 3 : 2));
    ClassifyExample e;
    e.ids.push_back(sp.cls);
    e.ids.insert(e.ids.end(), a.begin(), a.end());
    e.ids.push_back(sp.sep);
    e.types.assign(e.ids.size(), 0);
    if (pair) {
      e.ids.insert(e.ids.end(), b.begin(), b.end());
      e.ids.push_back(sp.sep);
      e.types.resize(e.ids.size(), 1);
    }
    e.label = col.label.empty() ? -1 : label_of(row.at(col.label), opt, where);
    out.push_back(std::move(e));
  }
  return out;
}

std::string labels_text(const std::vector<std::string>& labels) {
  std::string text;
  for (const std::string& l : labels) text += l + "\n";
  return text;
}

std::vector<std::string> parse_labels_text(const std::string& text, const std::string& what) {
  std::vector<std::string> labels;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) {
      MPT_CHECK(std::find(labels.begin(), labels.end(), line) == labels.end(),
                what + ": label '" + line + "' is named twice");
      labels.push_back(line);
    }
    start = end + 1;
  }
  MPT_CHECK(!labels.empty(), what + " names no labels");
  return labels;
}

}  // namespace mptrain
