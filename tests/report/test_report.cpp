// `mptrain report`: the chart and table builders on hand-made run directories, and the
// whole path as a user meets it — two short real runs, one report, loaded in headless
// Chromium — checking that the page loads with no errors, holds no scripts and fetches
// nothing, and that every chart's polyline holds exactly one point per metrics record
// that has its field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"
#include "report/report.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::run_mptrain;
using testing::TempDir;

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

// A run dir with n records: val_loss every 5th step, loss_scale only when asked.
void write_run(const std::string& dir, int n, bool loss_scale = false) {
  std::string lines;
  for (int s = 1; s <= n; ++s) {
    nlohmann::json r = {{"step", s},   {"tokens", s * 64},     {"train_loss", 10.0 / s},
                        {"lr", 1e-3},  {"grad_norm", 1.0 + s}, {"tokens_per_s", 1000.0 + s},
                        {"mfu", 0.01}, {"peak_rss_mb", 90}};
    if (s % 5 == 0) r["val_loss"] = 11.0 / s;
    if (loss_scale) r["loss_scale"] = 65536.0 / (s % 3 + 1);
    lines += r.dump() + "\n";
  }
  write_text(dir + "/metrics.jsonl", lines);
  write_text(dir + "/config.json", nlohmann::json{{"options", {{"lr", 0.001}, {"preset", "d2"}}}}.dump());
  write_text(dir + "/command.txt", "mptrain train --preset d2\n");
}

// Every <polyline> of a document: its data-run, data-field, and the number of "x,y" pairs.
struct Polyline {
  std::string run, field, chart;
  size_t points = 0;
};

std::vector<Polyline> polylines(const std::string& html) {
  std::vector<Polyline> out;
  static const std::regex svg_re("<svg[^>]*id=\"([^\"]+)\"");
  static const std::regex line_re("<polyline([^>]*)>");
  static const std::regex run_re("data-run=\"([^\"]*)\""), field_re("data-field=\"([^\"]*)\""),
      points_re(" points=\"([^\"]*)\"");
  // Chart ids in order of position, to tell which chart a polyline belongs to.
  std::vector<std::pair<size_t, std::string>> charts;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), svg_re); it != std::sregex_iterator(); ++it)
    charts.emplace_back(it->position(), (*it)[1].str());
  for (auto it = std::sregex_iterator(html.begin(), html.end(), line_re); it != std::sregex_iterator();
       ++it) {
    const std::string attrs = (*it)[1].str();
    std::smatch m;
    Polyline p;
    if (std::regex_search(attrs, m, run_re)) p.run = m[1].str();
    if (std::regex_search(attrs, m, field_re)) p.field = m[1].str();
    if (std::regex_search(attrs, m, points_re)) {
      const std::string pts = m[1].str();
      if (!pts.empty()) p.points = static_cast<size_t>(std::count(pts.begin(), pts.end(), ' ')) + 1;
    }
    for (const auto& [pos, id] : charts)
      if (pos < static_cast<size_t>(it->position())) p.chart = id;
    out.push_back(p);
  }
  return out;
}

// Records of a run's metrics.jsonl that hold `field` as a number.
size_t records_with(const std::string& run_dir, const std::string& field) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    n += j.contains(field) && j[field].is_number();
  }
  return n;
}

// The page may reference nothing outside itself: no scripts, no src/href URLs, no imports.
void expect_self_contained(const std::string& html) {
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url(http"), std::string::npos);
  std::string without_ns = html;
  for (size_t p; (p = without_ns.find("xmlns=\"http://www.w3.org/2000/svg\"")) != std::string::npos;)
    without_ns.erase(p, 34);
  EXPECT_EQ(without_ns.find("http://"), std::string::npos);
  EXPECT_EQ(without_ns.find("https://"), std::string::npos);
}

TEST(ReportCharts, NiceTicksCoverTheRangeAtRoundSteps) {
  auto t = report::nice_ticks(1, 30, 8);
  EXPECT_EQ(t.front(), 0);
  EXPECT_EQ(t.back(), 30);
  EXPECT_EQ(t[1] - t[0], 5);
  t = report::nice_ticks(3.7, 10.9, 6);
  EXPECT_LE(t.front(), 3.7);
  EXPECT_GE(t.back(), 10.9);
  EXPECT_EQ(t[1] - t[0], 1);
  EXPECT_EQ(report::format_tick(3e-4, 5e-5, false), "3.0e-4");
  EXPECT_EQ(report::format_tick(1200, 200, true), "1.2k");
  EXPECT_EQ(report::format_tick(2000000, 500000, true), "2M");
  EXPECT_EQ(report::format_tick(0.25, 0.05, false), "0.25");
}

TEST(ReportCharts, OnePolylinePerRunAndFieldWithOnePointPerRecord) {
  TempDir tmp;
  write_run(tmp / "a", 23);
  write_run(tmp / "b", 7, /*loss_scale=*/true);
  const auto runs = report::load_runs({tmp / "a", tmp / "b"});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].name, "a");
  EXPECT_EQ(runs[1].name, "b");
  const std::string html = report::render_report_html(runs, {});
  expect_self_contained(html);
  const auto lines = polylines(html);
  std::map<std::string, int> per_chart;
  for (const auto& p : lines) {
    ++per_chart[p.chart];
    EXPECT_EQ(p.points, records_with(tmp / p.run, p.field)) << p.chart << " " << p.run << " " << p.field;
  }
  EXPECT_EQ(per_chart["chart-loss-steps"], 4);  // train + val for each run
  EXPECT_EQ(per_chart["chart-loss-tokens"], 4);
  EXPECT_EQ(per_chart["chart-lr"], 2);
  EXPECT_EQ(per_chart["chart-loss-scale"], 2);  // run a has none: an empty polyline, b its 7 points
  EXPECT_EQ(per_chart["chart-throughput"], 2);
  // The tables: one row per run, the configuration's options.
  EXPECT_NE(html.find("Final numbers"), std::string::npos);
  EXPECT_NE(html.find("options.preset"), std::string::npos);
}

TEST(ReportCharts, FieldsAddedByFeaturesGetTheirOwnChart) {
  TempDir tmp;
  write_run(tmp / "r", 4);
  std::ofstream(tmp / "r/metrics.jsonl", std::ios::app)
      << R"({"step":5,"tokens":320,"train_loss":2,"win_rate":0.4})"
      << "\n";
  const auto charts = report::report_charts(report::load_runs({tmp / "r"}));
  bool found = false;
  for (const auto& c : charts) found |= c.id == "chart-field-win_rate";
  EXPECT_TRUE(found);
}

// A classifier's run (train --task classify) shows its best validation's confusion matrix.
TEST(ReportRuns, AClassifiersConfusionMatrixIsATable) {
  TempDir tmp;
  write_run(tmp / "cls", 3);
  write_text(tmp / "cls/confusion.json",
             R"({"step":3,"accuracy":0.75,"macro_f1":0.7,"labels":["art","law"],"confusion":[[3,1],[0,4]]})");
  const std::string html = report::render_report_html(report::load_runs({tmp / "cls"}), {});
  EXPECT_NE(html.find("Confusion matrix (best validation)"), std::string::npos);
  EXPECT_NE(html.find("accuracy 0.7500, macro-F1 0.7000"), std::string::npos);
  EXPECT_NE(html.find("<th>art</th><th>law</th><th>recall</th>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>art</td><td>3</td><td>1</td><td>0.750</td>"), std::string::npos) << html;
  write_run(tmp / "plain", 3);
  EXPECT_EQ(report::render_report_html(report::load_runs({tmp / "plain"}), {}).find("Confusion"),
            std::string::npos);
  write_text(tmp / "cls/confusion.json", "[1, 2]");
  testing::expect_error([&] { report::load_runs({tmp / "cls"}); }, "not a confusion matrix");
}

TEST(ReportRuns, SameNamedRunDirsAreToldApartAndBadInputIsAClearError) {
  TempDir tmp;
  write_run(tmp / "x/run", 3);
  write_run(tmp / "y/run", 3);
  const auto runs = report::load_runs({tmp / "x/run", tmp / "y/run"});
  EXPECT_EQ(runs[0].name, "x/run");
  EXPECT_EQ(runs[1].name, "y/run");

  // A torn last line (a killed run) is skipped; a bad line elsewhere is an error naming it.
  std::ofstream(tmp / "x/run/metrics.jsonl", std::ios::app) << "{\"step\":4,\"tra";
  EXPECT_EQ(report::load_run(tmp / "x/run").records.size(), 3u);
  EXPECT_EQ(report::load_run(tmp / "x/run").skipped_lines, 1u);
  std::ofstream(tmp / "x/run/metrics.jsonl", std::ios::app) << "\n{\"step\":5}\n";
  try {
    report::load_run(tmp / "x/run");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:4"), std::string::npos) << e.what();
  }
  auto r = run_mptrain("report " + (tmp / "nothing-here") + " -o " + (tmp / "r.html"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("not a run directory"), std::string::npos) << r.output;
}

bool have(const char* tool) {
  return run_command(std::string("command -v ") + tool + " >/dev/null").exit_code == 0;
}

// Two real runs (d2, a few steps, different learning rates), a report, and Chromium.
TEST(ReportEndToEnd, TwoRunsRenderInHeadlessChromiumWithOnePointPerRecord) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  for (const char* lr : {"3e-3", "1e-3"}) {
    auto r = run_mptrain(
        "train --preset d2 --train-data '" + (tmp / "train_*.bin") + "' --val-data '" + (tmp / "val_*.bin") +
        "' --batch 2 --seq 32 --steps 12 --lr " + lr +
        " --warmup 2 --val-every 4 --val-steps 2 --sample-tokens 4 --threads 2 --quiet --run-dir " +
        (tmp / ("lr" + std::string(lr))));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const std::string a = tmp / "lr3e-3", b = tmp / "lr1e-3", html_path = tmp / "report.html";
  // Every run dir holds the resolved configuration and the command line.
  for (const auto& d : {a, b}) {
    std::ifstream cfg(d + "/config.json");
    const auto j = nlohmann::json::parse(cfg);
    EXPECT_EQ(j["options"]["steps"], 12);
    EXPECT_EQ(j["model"]["n_layer"], 2);
    EXPECT_GT(j["peak_tflops"].get<double>(), 0.0);
    std::ifstream cmd(d + "/command.txt");
    std::string line;
    std::getline(cmd, line);
    EXPECT_NE(line.find("train --preset d2"), std::string::npos) << line;
    EXPECT_EQ(records_with(d, "train_loss"), 12u);
    EXPECT_EQ(records_with(d, "val_loss"), 3u);
    EXPECT_EQ(records_with(d, "mfu"), 12u);
    EXPECT_EQ(records_with(d, "peak_rss_mb"), 12u);
  }
  auto rep = run_mptrain("report " + a + " " + b + " -o " + html_path);
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  std::ifstream in(html_path);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  expect_self_contained(html);

  if (!have("chromium")) GTEST_SKIP() << "chromium missing (scripts/setup.sh installs Debian's chromium)";
  const std::string err = tmp / "chromium.err";
  auto dom = run_command(
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking "
      "--disable-component-update --disable-sync --no-first-run --enable-logging=stderr --v=0 "
      "--user-data-dir=" +
      (tmp / "chromium-profile") + " --dump-dom file://" + html_path + " 2>" + err);
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  std::ifstream es(err);
  const std::string log((std::istreambuf_iterator<char>(es)), std::istreambuf_iterator<char>());
  EXPECT_EQ(log.find("CONSOLE"), std::string::npos) << log;  // console messages (JS errors among them)
  EXPECT_EQ(log.find("Uncaught"), std::string::npos) << log;
  ASSERT_NE(dom.output.find("</html>"), std::string::npos) << dom.output.substr(0, 2000);
  EXPECT_NE(dom.output.find("Final numbers"), std::string::npos);

  // The DOM as Chromium parsed it: each chart holds one polyline per run (two for the loss
  // charts: train and val), each with one point per record holding its field.
  const auto lines = polylines(dom.output);
  std::map<std::string, size_t> per_chart;
  for (const auto& p : lines) {
    ++per_chart[p.chart];
    const std::string dir = p.run == "lr3e-3" ? a : b;
    EXPECT_EQ(p.points, records_with(dir, p.field)) << p.chart << " " << p.run << " " << p.field;
    EXPECT_GT(p.points, 0u) << p.chart << " " << p.run << " " << p.field;
  }
  for (const char* chart : {"chart-loss-steps", "chart-loss-tokens"})
    EXPECT_EQ(per_chart[chart], 4u) << chart;
  for (const char* chart : {"chart-lr", "chart-grad-norm", "chart-throughput", "chart-mfu", "chart-memory"})
    EXPECT_EQ(per_chart[chart], 2u) << chart;
  EXPECT_EQ(per_chart.count("chart-loss-scale"), 0u);  // fp32 runs have no loss scale

  // --png renders each chart with rsvg-convert.
  if (!have("rsvg-convert")) GTEST_SKIP() << "rsvg-convert missing (scripts/setup.sh installs librsvg2-bin)";
  auto png = run_mptrain("report " + a + " " + b + " -o " + html_path + " --png " + (tmp / "png"));
  ASSERT_EQ(png.exit_code, 0) << png.output;
  std::ifstream f(tmp / "png/chart-loss-steps.png", std::ios::binary);
  char magic[8] = {};
  f.read(magic, 8);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
}

}  // namespace
}  // namespace mptrain
