// Run loading, the chart set of a report, and PNG export through rsvg-convert.
#include "report/report.h"

#include <sys/wait.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "train/run_files.h"  // shell_quote

namespace mptrain::report {

namespace fs = std::filesystem;

namespace {

// Distinct on white and for the common colour-vision deficiencies (Tableau 10 order).
const char* const kPalette[] = {"#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1",
                                "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#7f7f7f"};

// One field drawn in a chart, with how it looks.
struct FieldStyle {
  const char* field;
  const char* role;  // legend text for the line style when a chart draws several fields
  bool dashed;
  bool markers;
};

struct ChartDef {
  const char* id;
  const char* title;
  const char* x_field;
  const char* x_label;
  const char* y_label;
  std::vector<FieldStyle> fields;
  double y_factor = 1.0;  // displayed value = field value x factor (MFU as a percentage)
  bool y_si = false;
  YScale y_scale = YScale::kLinear;
  bool y_from_zero = false;
};

const std::vector<ChartDef>& chart_defs() {
  // One chart per row.
  // clang-format off
  static const std::vector<ChartDef> defs = {
      {"loss-steps", "Loss vs steps", "step", "optimizer step", "loss (nats / token)",
       {{"train_loss", "train", false, false}, {"val_loss", "val", true, true}}},
      {"loss-tokens", "Loss vs tokens", "tokens", "tokens seen", "loss (nats / token)",
       {{"train_loss", "train", false, false}, {"val_loss", "val", true, true}}},
      {"lr", "Learning rate", "step", "optimizer step", "learning rate", {{"lr", "", false, false}}},
      {"grad-norm", "Gradient norm", "step", "optimizer step", "global L2 norm (before clipping)",
       {{"grad_norm", "", false, false}}},
      {"loss-scale", "Loss scale (fp16)", "step", "optimizer step", "loss scale",
       {{"loss_scale", "", false, false}}, 1.0, false, YScale::kLog2},
      {"throughput", "Throughput", "step", "optimizer step", "tokens / s", {{"tokens_per_s", "", false, false}},
       1.0, true, YScale::kLinear, true},
      {"mfu", "Model FLOPs utilisation", "step", "optimizer step", "MFU (% of peak)", {{"mfu", "", false, false}},
       100.0, false, YScale::kLinear, true},
      {"memory", "Peak memory", "step", "optimizer step", "resident memory high-water mark (MB)",
       {{"peak_rss_mb", "", false, false}}, 1.0, false, YScale::kLinear, true},
  };
  // clang-format on
  return defs;
}

// Fields that are axes, drawn by a chart above, or duplicates of one (ms of tokens/s).
const std::set<std::string>& fields_not_charted_generically() {
  static const std::set<std::string> s = {
      "step",         "tokens", "train_loss",  "val_loss", "lr",        "grad_norm", "loss_scale",
      "tokens_per_s", "mfu",    "peak_rss_mb", "ms",       "elapsed_s", "tflops"};
  return s;
}

bool finite_number(const nlohmann::json& r, const std::string& key) {
  auto it = r.find(key);
  return it != r.end() && it->is_number() && std::isfinite(it->get<double>());
}

Chart build_chart(const ChartDef& d, const std::vector<RunData>& runs) {
  Chart c;
  c.id = std::string("chart-") + d.id;
  c.title = d.title;
  c.x_label = d.x_label;
  c.y_label = d.y_label;
  c.x_si = std::string(d.x_field) == "tokens";
  c.y_si = d.y_si;
  c.y_scale = d.y_scale;
  c.y_from_zero = d.y_from_zero;
  for (size_t r = 0; r < runs.size(); ++r) {
    bool has_points = false;
    for (const FieldStyle& f : d.fields) {
      ChartSeries s;
      s.label = runs[r].name + (d.fields.size() > 1 ? std::string(" (") + f.role + ")" : "");
      s.color = run_color(r);
      s.dashed = f.dashed;
      s.markers = f.markers;
      s.attributes = {{"data-run", runs[r].name}, {"data-field", f.field}, {"data-x", d.x_field}};
      for (const auto& rec : runs[r].records)
        if (finite_number(rec, d.x_field) && finite_number(rec, f.field))
          s.points.emplace_back(rec[d.x_field].get<double>(), rec[f.field].get<double>() * d.y_factor);
      s.attributes.push_back({"data-points", std::to_string(s.points.size())});
      // A field on some steps only (Sophia's Hessian steps) reads better with dots.
      if (2 * s.points.size() < runs[r].records.size()) s.markers = true;
      has_points |= !s.points.empty();
      c.series.push_back(std::move(s));
    }
    if (has_points) c.legend.push_back({runs[r].name, run_color(r), false});  // runs without data stay out
  }
  if (d.fields.size() > 1)
    for (const FieldStyle& f : d.fields) c.legend.push_back({f.role, "#666666", f.dashed});
  return c;
}

bool any_data(const Chart& c) {
  for (const auto& s : c.series)
    if (!s.points.empty()) return true;
  return false;
}

}  // namespace

std::string run_color(size_t run) { return kPalette[run % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

RunData load_run(const std::string& dir) {
  RunData run;
  run.dir = dir;
  const std::string path = dir + "/metrics.jsonl";
  std::ifstream in(path);
  if (!in) throw Error("'" + dir + "' is not a run directory: cannot read " + path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  for (size_t i = 0; i < lines.size(); ++i) {
    auto j = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
      if (i + 1 == lines.size()) {  // a run killed mid-write leaves a torn last line
        ++run.skipped_lines;
        continue;
      }
      throw Error(path + ":" + std::to_string(i + 1) + ": not a JSON object");
    }
    run.records.push_back(std::move(j));
  }
  if (fs::exists(dir + "/config.json")) {
    std::ifstream c(dir + "/config.json");
    run.config = nlohmann::json::parse(c, nullptr, /*allow_exceptions=*/false);
    if (run.config.is_discarded()) throw Error(dir + "/config.json: not valid JSON");
  }
  if (fs::exists(dir + "/confusion.json")) {
    std::ifstream c(dir + "/confusion.json");
    run.confusion = nlohmann::json::parse(c, nullptr, /*allow_exceptions=*/false);
    if (!run.confusion.is_object() || !run.confusion["labels"].is_array() ||
        !run.confusion["confusion"].is_array())
      throw Error(dir + "/confusion.json: not a confusion matrix (labels, confusion)");
  }
  std::ifstream cmd(dir + "/command.txt");
  std::getline(cmd, run.command);
  return run;
}

std::vector<RunData> load_runs(const std::vector<std::string>& dirs) {
  MPT_CHECK(!dirs.empty(), "report: name at least one run directory");
  std::vector<RunData> runs;
  std::vector<std::vector<std::string>> parts;  // path components, last first
  for (const auto& d : dirs) {
    runs.push_back(load_run(d));
    fs::path p = fs::absolute(d).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    std::vector<std::string> comps;
    for (fs::path q = p; !q.filename().empty(); q = q.parent_path()) comps.push_back(q.filename().string());
    if (comps.empty()) comps.push_back(p.string());
    parts.push_back(std::move(comps));
  }
  // Lengthen names until they are unique (or the paths run out).
  std::vector<size_t> depth(runs.size(), 1);
  auto name = [&](size_t i) {
    std::string n;
    for (size_t k = std::min(depth[i], parts[i].size()); k-- > 0;) n += (n.empty() ? "" : "/") + parts[i][k];
    return n;
  };
  for (int round = 0; round < 64; ++round) {
    std::map<std::string, std::vector<size_t>> by_name;
    for (size_t i = 0; i < runs.size(); ++i) by_name[name(i)].push_back(i);
    bool changed = false;
    for (auto& [n, idx] : by_name) {
      if (idx.size() < 2) continue;
      for (size_t i : idx)
        if (depth[i] < parts[i].size()) {
          ++depth[i];
          changed = true;
        }
    }
    if (!changed) break;
  }
  std::map<std::string, int> seen;
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].name = name(i);
    if (int k = seen[runs[i].name]++; k > 0)
      runs[i].name += " #" + std::to_string(k + 1);  // the same dir twice
  }
  return runs;
}

std::vector<Chart> report_charts(const std::vector<RunData>& runs) {
  std::vector<Chart> charts;
  for (const ChartDef& d : chart_defs()) {
    Chart c = build_chart(d, runs);
    if (any_data(c)) charts.push_back(std::move(c));
  }
  // Any other numeric field (a feature's own: skipped_steps, win_rate, ...) gets a chart.
  std::set<std::string> extra;
  for (const auto& run : runs)
    for (const auto& rec : run.records)
      for (auto it = rec.begin(); it != rec.end(); ++it)
        if (it.value().is_number() && !fields_not_charted_generically().count(it.key()))
          extra.insert(it.key());
  for (const std::string& f : extra) {
    ChartDef d{"", "", "step", "optimizer step", "", {{f.c_str(), "", false, false}}};
    std::string title = f;  // "win_rate" -> "Win rate"
    for (char& ch : title)
      if (ch == '_') ch = ' ';
    title[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(title[0])));
    const std::string id = "field-" + f;
    d.id = id.c_str();
    d.title = title.c_str();
    d.y_label = f.c_str();
    Chart c = build_chart(d, runs);
    if (any_data(c)) charts.push_back(std::move(c));
  }
  return charts;
}

std::vector<std::string> write_chart_pngs(const std::vector<Chart>& charts, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create folder '" + dir + "': " + ec.message());
  if (std::system("command -v rsvg-convert >/dev/null 2>&1") != 0)
    throw Error("--png needs rsvg-convert (Debian package librsvg2-bin; scripts/setup.sh installs it)");
  std::vector<std::string> pngs;
  for (const Chart& c : charts) {
    const std::string svg = dir + "/" + c.id + ".svg", png = dir + "/" + c.id + ".png";
    std::ofstream(svg) << render_svg(c, /*standalone=*/true);
    const std::string cmd =
        "rsvg-convert --zoom 2 --format png --output " + shell_quote(png) + " " + shell_quote(svg) + " 2>&1";
    const int rc = std::system(cmd.c_str());
    if (rc != 0 || !fs::exists(png))
      throw Error("rsvg-convert failed on '" + svg + "' (exit status " +
                  std::to_string(WIFEXITED(rc) ? WEXITSTATUS(rc) : rc) + ")");
    pngs.push_back(png);
  }
  return pngs;
}

}  // namespace mptrain::report
