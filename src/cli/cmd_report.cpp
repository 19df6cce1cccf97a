// `mptrain report RUN_DIR [RUN_DIR ...] -o report.html [--png DIR]`: one self-contained
// HTML page comparing runs (report/report.h); --png also renders each chart to PNG with
// rsvg-convert.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/subcommands.h"
#include "io/fileutil.h"
#include "report/report.h"

namespace mptrain {

void register_report(CLI::App& app, int& exit_code) {
  struct Args {
    std::vector<std::string> run_dirs;
    std::string out = "report.html";
    std::string png_dir;
    std::string title = "mptrain run report";
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "report", "Write one self-contained HTML page (inline SVG charts, no scripts) comparing training runs");
  cmd->add_option("run_dirs", a->run_dirs, "Run directories (each with metrics.jsonl)")->required();
  cmd->add_option("-o,--out", a->out, "The HTML file to write")->capture_default_str();
  cmd->add_option("--png", a->png_dir, "Also render every chart to DIR/<chart>.png (needs rsvg-convert)");
  cmd->add_option("--title", a->title, "Page title")->capture_default_str();
  cmd->callback([a, &exit_code]() {
    const auto runs = report::load_runs(a->run_dirs);
    write_file_atomic(a->out, report::render_report_html(runs, {.title = a->title}));
    size_t records = 0;
    for (const auto& r : runs) records += r.records.size();
    std::printf("report: %zu run%s, %zu records -> %s\n", runs.size(), runs.size() == 1 ? "" : "s", records,
                a->out.c_str());
    if (!a->png_dir.empty()) {
      const auto pngs = report::write_chart_pngs(report::report_charts(runs), a->png_dir);
      std::printf("report: %zu chart%s -> %s/*.png\n", pngs.size(), pngs.size() == 1 ? "" : "s",
                  a->png_dir.c_str());
    }
    exit_code = 0;
  });
}

}  // namespace mptrain
