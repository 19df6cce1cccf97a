// `mptrain report`: one self-contained HTML page comparing training runs.
//
// Reads each RUN_DIR's metrics.jsonl (train/metrics.h), config.json and command.txt
// (train/run_files.h) and writes one HTML file with no scripts and no external resources:
// inline CSS, charts as inline SVG (report/svg_chart.h) with the runs overlaid — train
// and val loss against steps and against tokens, learning rate, gradient norm, loss scale
// (when a run has one), tokens/s, MFU, peak memory, plus a chart for any other numeric
// field a feature adds to the records — then a table of each run's final numbers and a
// table of the configurations with the rows that differ marked.
//
// A series holds one point per record that has the field as a finite number, in file
// order; nothing is thinned or smoothed.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/svg_chart.h"

namespace mptrain::report {

struct RunData {
  std::string dir;
  std::string name;                     // unique among the runs of one report
  nlohmann::json config;                // RUN_DIR/config.json; null when absent
  std::string command;                  // the first line of RUN_DIR/command.txt
  std::vector<nlohmann::json> records;  // metrics.jsonl, in file order
  nlohmann::json confusion;             // a classifier's RUN_DIR/confusion.json (best validation); null when absent
  size_t skipped_lines = 0;             // a torn last line (a killed run) is skipped
};

// Reads one run directory. Throws Error when metrics.jsonl is missing or a line other
// than the last is not a JSON object (naming the file and line).
RunData load_run(const std::string& dir);

// load_run for each, then names: each directory's last component, lengthened with its
// parents where two runs would otherwise share one.
std::vector<RunData> load_runs(const std::vector<std::string>& dirs);

// The colour of the run at this position in a report (charts, legends and tables agree).
std::string run_color(size_t run);

// The charts of a report (only those for which some run has data).
std::vector<Chart> report_charts(const std::vector<RunData>& runs);

struct ReportOptions {
  std::string title = "mptrain run report";
};

std::string render_report_html(const std::vector<RunData>& runs, const ReportOptions& options);

// Writes DIR/<chart id>.svg and DIR/<chart id>.png (rendered at twice the size by
// rsvg-convert, Debian's librsvg2-bin); returns the PNG paths. Throws Error when
// rsvg-convert is missing or fails.
std::vector<std::string> write_chart_pngs(const std::vector<Chart>& charts, const std::string& dir);

}  // namespace mptrain::report
