// Line charts as inline SVG: axes with "nice" ticks, grid, labels, a legend and one
// <polyline> per series, with no scripts and no external resources, so the same text
// works inside an HTML page and as a standalone .svg file (for rsvg-convert).
//
// Every series is one <polyline> whose `points` attribute holds exactly the series'
// points, in order, as "x,y" pairs separated by single spaces (nothing is thinned or
// smoothed: tests count them against metrics.jsonl); its data-* attributes say what it is.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace mptrain::report {

enum class YScale { kLinear, kLog2 };  // kLog2: for fp16 loss scales, which move by powers of two

struct ChartSeries {
  std::string label;  // the run's name (the polyline's <title>)
  std::string color;  // CSS color
  bool dashed = false;
  bool markers = false;                           // a dot on every point (sparse series such as val loss)
  std::vector<std::pair<double, double>> points;  // (x, y), finite
  std::vector<std::pair<std::string, std::string>> attributes;  // extra attributes: {"data-run", "a"}
};

struct LegendEntry {
  std::string label;
  std::string color;
  bool dashed = false;
};

struct Chart {
  std::string id;  // unique within a page: element ids derive from it
  std::string title, x_label, y_label;
  bool x_si = false;  // tick labels with k/M/G suffixes (tokens)
  bool y_si = false;
  YScale y_scale = YScale::kLinear;
  bool y_from_zero = false;  // the linear y axis starts at 0 (memory, throughput: no exaggerated wiggles)
  std::vector<ChartSeries> series;
  std::vector<LegendEntry> legend;
  int width = 720, height = 420;
};

// The chart as an <svg> element; with `standalone`, an XML declaration and a white
// background make it a complete .svg file.
std::string render_svg(const Chart& chart, bool standalone);

// Ticks covering [lo, hi] at a 1/2/5 x 10^k step, about `target` of them; the first is
// <= lo and the last >= hi (the axis is then stretched to them).
std::vector<double> nice_ticks(double lo, double hi, int target);

// Tick label for v on an axis whose ticks are `step` apart.
std::string format_tick(double v, double step, bool si);

// Text safe inside XML/HTML elements and attribute values.
std::string xml_escape(const std::string& text);

}  // namespace mptrain::report
