// The HTML page of `mptrain report`: header, run list, charts, final numbers, configuration.
// Everything is inline (CSS in <style>, charts as <svg>); the page has no scripts.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

#include "core/progress.h"  // format_duration, format_si
#include "core/stats.h"
#include "report/report.h"

namespace mptrain::report {

namespace {

constexpr const char* kStyle = R"css(
:root { color-scheme: light; }
body { margin: 0; background: #f5f6f8; color: #1a1a1a;
       font: 14px/1.45 "DejaVu Sans", "Helvetica Neue", Helvetica, Arial, sans-serif; }
main { max-width: 1520px; margin: 0 auto; padding: 24px 28px 40px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 10px; }
.meta { color: #666; margin: 0 0 18px; }
.card { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 14px 16px; }
.runs { list-style: none; margin: 0; padding: 0; }
.runs li { margin: 4px 0; }
.swatch { display: inline-block; width: 22px; height: 4px; border-radius: 2px; vertical-align: middle; margin-right: 8px; }
.runs code { color: #555; font-size: 12px; word-break: break-all; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 16px; }
.charts .card { padding: 8px; }
svg.chart { width: 100%; height: auto; display: block; }
table { border-collapse: collapse; background: #fff; font-size: 13px; }
th, td { border-bottom: 1px solid #e3e6ea; padding: 6px 12px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #eef1f4; font-weight: 600; }
tr.diff td { background: #fff7e0; }
td.missing { color: #aaa; }
table.config td, table.config th { text-align: left; }
.note { color: #666; font-size: 12px; margin-top: 8px; }
.scroll { overflow-x: auto; }
)css";

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string now_utc() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

// Values of a field over a run's records (finite numbers only).
std::vector<double> values(const RunData& run, const char* field) {
  std::vector<double> v;
  for (const auto& r : run.records) {
    auto it = r.find(field);
    if (it != r.end() && it->is_number() && std::isfinite(it->get<double>())) v.push_back(it->get<double>());
  }
  return v;
}

std::string cell(double v, const char* f) { return std::isfinite(v) ? fmt(f, v) : ""; }

std::string td(const std::string& text) {
  return text.empty() ? "<td class=\"missing\">&mdash;</td>" : "<td>" + xml_escape(text) + "</td>";
}

std::string final_numbers_table(const std::vector<RunData>& runs) {
  std::string o =
      "<div class=\"scroll\"><table><thead><tr><th>run</th><th>steps</th><th>tokens</th>"
      "<th>final train loss</th><th>min train loss</th><th>final val loss</th><th>best val loss</th>"
      "<th>median tokens/s</th><th>median MFU</th><th>peak memory</th><th>step time total</th></tr>"
      "</thead><tbody>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    const auto train = values(r, "train_loss"), val = values(r, "val_loss"), steps = values(r, "step"),
               tokens = values(r, "tokens"), tps = values(r, "tokens_per_s"), mfu = values(r, "mfu"),
               rss = values(r, "peak_rss_mb"), ms = values(r, "ms");
    double total_ms = 0;
    for (double m : ms) total_ms += m;
    o += "<tr><td><span class=\"swatch\" style=\"background:" + run_color(i) + "\"></span>" +
         xml_escape(r.name) + "</td>";
    o += td(steps.empty() ? "" : fmt("%.0f", steps.back()));
    o += td(tokens.empty() ? "" : format_si(tokens.back()));
    o += td(train.empty() ? "" : cell(train.back(), "%.4f"));
    o += td(train.empty() ? "" : cell(*std::min_element(train.begin(), train.end()), "%.4f"));
    o += td(val.empty() ? "" : cell(val.back(), "%.4f"));
    o += td(val.empty() ? "" : cell(*std::min_element(val.begin(), val.end()), "%.4f"));
    o += td(tps.empty() ? "" : format_si(median(tps)));
    o += td(mfu.empty() ? "" : cell(median(mfu) * 100.0, "%.2f%%"));
    o += td(rss.empty() ? "" : cell(*std::max_element(rss.begin(), rss.end()), "%.0f MB"));
    o += td(ms.empty() ? "" : format_duration(total_ms / 1e3));
    o += "</tr>\n";
  }
  o += "</tbody></table></div>\n";
  return o;
}

// "options.lr" -> value text, from a run's config.json (nested objects flattened).
void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else if (j.is_string()) {
    out[prefix] = j.get<std::string>();
  } else if (j.is_number_float()) {
    out[prefix] = fmt("%.6g", j.get<double>());
  } else if (!j.is_null()) {
    out[prefix] = j.dump();
  }
}

std::string config_table(const std::vector<RunData>& runs) {
  std::vector<std::map<std::string, std::string>> flat(runs.size());
  std::vector<std::string> keys;  // in first-seen order: config.json's own grouping
  std::set<std::string> seen;
  for (size_t i = 0; i < runs.size(); ++i) {
    flatten(runs[i].config, "", flat[i]);
    if (!runs[i].command.empty()) flat[i]["command"] = runs[i].command;
  }
  for (const auto& f : flat)
    for (const auto& [k, v] : f)
      if (seen.insert(k).second) keys.push_back(k);
  std::string o = "<div class=\"scroll\"><table class=\"config\"><thead><tr><th>setting</th>";
  for (const auto& r : runs) o += "<th>" + xml_escape(r.name) + "</th>";
  o += "</tr></thead><tbody>\n";
  for (const auto& k : keys) {
    if (k == "command") continue;
    std::set<std::string> distinct;
    for (const auto& f : flat) distinct.insert(f.count(k) ? f.at(k) : "");
    o += std::string(distinct.size() > 1 ? "<tr class=\"diff\">" : "<tr>") + "<td>" + xml_escape(k) + "</td>";
    for (const auto& f : flat) o += td(f.count(k) ? f.at(k) : "");
    o += "</tr>\n";
  }
  o += "</tbody></table></div>\n";
  if (runs.size() > 1) o += "<p class=\"note\">Highlighted rows differ between runs.</p>\n";
  return o;
}

// A classifier's confusion matrix at its best validation (train/classify_task.h): rows the true
// labels, columns the predictions, each row's recall beside it.
std::string confusion_table(const RunData& r) {
  const nlohmann::json& c = r.confusion;
  const nlohmann::json& labels = c["labels"];
  std::string o = "<h3>" + xml_escape(r.name) + "</h3>\n<p class=\"note\">step " +
                  c.value("step", nlohmann::json()).dump() + ": accuracy " +
                  fmt("%.4f", c.value("accuracy", 0.0)) + ", macro-F1 " +
                  fmt("%.4f", c.value("macro_f1", 0.0)) + " (rows: true label; columns: predicted)</p>\n";
  o += "<div class=\"scroll\"><table class=\"config\"><thead><tr><th></th>";
  for (const auto& l : labels)
    o += "<th>" + xml_escape(l.is_string() ? l.get<std::string>() : l.dump()) + "</th>";
  o += "<th>recall</th></tr></thead><tbody>\n";
  for (size_t i = 0; i < labels.size() && i < c["confusion"].size(); ++i) {
    const nlohmann::json& row = c["confusion"][i];
    double total = 0.0, right = 0.0;
    o += "<tr><td>" + xml_escape(labels[i].is_string() ? labels[i].get<std::string>() : labels[i].dump()) +
         "</td>";
    for (size_t j = 0; j < row.size(); ++j) {
      const double n = row[j].is_number() ? row[j].get<double>() : 0.0;
      total += n;
      if (i == j) right = n;
      o += td(fmt("%.0f", n));
    }
    o += td(total > 0 ? fmt("%.3f", right / total) : "") + "</tr>\n";
  }
  return o + "</tbody></table></div>\n";
}

}  // namespace

std::string render_report_html(const std::vector<RunData>& runs, const ReportOptions& options) {
  const std::vector<Chart> charts = report_charts(runs);
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"generator\" content=\"mptrain report\">\n<title>" +
      xml_escape(options.title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<main>\n";
  o += "<h1>" + xml_escape(options.title) + "</h1>\n<p class=\"meta\">" + std::to_string(runs.size()) +
       (runs.size() == 1 ? " run" : " runs") + " &middot; generated " + now_utc() +
       " by <code>mptrain report</code></p>\n";

  o += "<div class=\"card\"><ul class=\"runs\">\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    o += "<li><span class=\"swatch\" style=\"background:" + run_color(i) + "\"></span><strong>" +
         xml_escape(r.name) + "</strong> &nbsp;<code>" + xml_escape(r.dir) + "</code> &middot; " +
         std::to_string(r.records.size()) + " records";
    if (r.skipped_lines) o += " (a torn last line skipped)";
    if (!r.command.empty()) o += "<br><code>" + xml_escape(r.command) + "</code>";
    o += "</li>\n";
  }
  o += "</ul></div>\n";

  o += "<h2>Charts</h2>\n<div class=\"charts\">\n";
  for (const Chart& c : charts)
    o += "<div class=\"card\">" + render_svg(c, /*standalone=*/false) + "</div>\n";
  if (charts.empty()) o += "<p class=\"note\">The runs hold no metrics yet.</p>\n";
  o += "</div>\n";

  o += "<h2>Final numbers</h2>\n" + final_numbers_table(runs);
  std::set<std::string> formulas;
  for (const auto& r : runs)
    if (r.config.is_object() && r.config.contains("peak_formula") && r.config["peak_formula"].is_string())
      formulas.insert(r.config["peak_formula"].get<std::string>());
  if (!formulas.empty()) {
    o +=
        "<p class=\"note\">MFU = achieved model FLOP/s (6&middot;N + 6&middot;L&middot;C&middot;T per token, "
        "docs/ARCHITECTURE.md) over the peak: ";
    bool first = true;
    for (const auto& f : formulas) {
      o += std::string(first ? "" : "; ") + xml_escape(f);
      first = false;
    }
    o += ".</p>\n";
  }
  bool confusion = false;
  for (const auto& r : runs)
    if (r.confusion.is_object()) {
      if (!confusion) o += "<h2>Confusion matrix (best validation)</h2>\n";
      confusion = true;
      o += confusion_table(r);
    }
  o += "<h2>Configuration</h2>\n" + config_table(runs);
  o += "</main>\n</body>\n</html>\n";
  return o;
}

}  // namespace mptrain::report
