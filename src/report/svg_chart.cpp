// SVG line charts: layout, scales, ticks, grid, legend and series.
#include "report/svg_chart.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/progress.h"  // format_si

namespace mptrain::report {

namespace {

constexpr const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";
constexpr double kCharWidth = 6.8;  // average advance of a 12 px sans-serif glyph, for layout
constexpr double kLegendRow = 18.0;
constexpr int kMarginLeft = 72, kMarginRight = 24, kMarginBottom = 52, kTitleHeight = 30;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string num(double v) { return fmt("%.1f", v); }

// One axis: data range -> pixel range, with its ticks.
struct Axis {
  double lo = 0, hi = 1;  // in scale units (log2 of the value for kLog2)
  double p0 = 0, p1 = 1;  // pixels for lo and hi
  bool log2 = false;
  std::vector<double> ticks;  // in scale units
  double step = 1;

  double at(double s) const { return p0 + (s - lo) / (hi - lo) * (p1 - p0); }  // s in scale units
  double pixel(double v) const { return at(log2 ? std::log2(v) : v); }         // v a data value
};

Axis make_linear_axis(double lo, double hi, int target) {
  Axis a;
  if (!(hi > lo)) {  // one value (or none): a band around it
    const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  a.ticks = nice_ticks(lo, hi, target);
  a.step = a.ticks.size() > 1 ? a.ticks[1] - a.ticks[0] : 1.0;
  a.lo = a.ticks.front();
  a.hi = a.ticks.back();
  return a;
}

Axis make_log2_axis(double lo, double hi) {
  Axis a;
  a.log2 = true;
  a.lo = std::floor(std::log2(lo));
  a.hi = std::ceil(std::log2(hi));
  if (a.hi <= a.lo) a.hi = a.lo + 1;
  const int span = static_cast<int>(a.hi - a.lo);
  const int every = std::max(1, (span + 7) / 8);  // at most about eight labelled powers
  for (double e = a.lo; e <= a.hi; e += every) a.ticks.push_back(e);
  a.step = every;
  return a;
}

std::string tick_label(const Axis& a, double tick, bool si) {
  if (a.log2) {
    const double v = std::exp2(tick);
    return v >= 1e5 || v < 1e-2 ? "2^" + fmt("%.0f", tick) : format_tick(v, v < 1 ? v : 1, si);
  }
  return format_tick(tick, a.step, si);
}

// Legend entries laid out left to right, wrapping; returns the rows used.
int legend_rows(const std::vector<LegendEntry>& legend, double width) {
  int rows = legend.empty() ? 0 : 1;
  double x = 0;
  for (const auto& e : legend) {
    const double w = 30 + e.label.size() * kCharWidth + 18;
    if (x > 0 && x + w > width) {
      ++rows;
      x = 0;
    }
    x += w;
  }
  return rows;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  const double first = std::floor(lo / step + 1e-9) * step;
  const double last = std::ceil(hi / step - 1e-9) * step;
  std::vector<double> ticks;
  for (int i = 0;; ++i) {
    const double t = first + i * step;
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);  // no "-0"
    if (t >= last - step * 1e-9) break;
  }
  return ticks;
}

std::string format_tick(double v, double step, bool si) {
  if (si && std::fabs(step) >= 1) {  // "1.20k" -> "1.2k", "2.00M" -> "2M"
    std::string s = format_si(v);
    const size_t dot = s.find('.');
    if (dot == std::string::npos) return s;
    size_t end = dot;
    while (end < s.size() && (std::isdigit(static_cast<unsigned char>(s[end])) || s[end] == '.')) ++end;
    size_t cut = end;
    while (cut > dot + 1 && s[cut - 1] == '0') --cut;
    if (cut == dot + 1) cut = dot;
    return s.substr(0, cut) + s.substr(end);
  }
  if (v == 0) return "0";
  if (std::fabs(step) < 1e-3) {  // learning rates: 3.0e-4
    std::string s = fmt("%.1e", v);
    const size_t e = s.find('e');  // "3.0e-04" -> "3.0e-4"
    if (e != std::string::npos && e + 2 < s.size() && s[e + 2] == '0') s.erase(e + 2, 1);
    return s;
  }
  if (std::fabs(step) >= 1) return fmt("%.0f", v);
  const int decimals = static_cast<int>(std::ceil(-std::log10(std::fabs(step)) - 1e-9));
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string render_svg(const Chart& c, bool standalone) {
  const double plot_w = c.width - kMarginLeft - kMarginRight;
  const int rows = legend_rows(c.legend, plot_w);
  const double top = kTitleHeight + rows * kLegendRow + 12;
  const double x0 = kMarginLeft, x1 = c.width - kMarginRight, y0 = top, y1 = c.height - kMarginBottom;

  // Data ranges over every series.
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const auto& s : c.series) {
    for (const auto& [x, y] : s.points) {
      if (c.y_scale == YScale::kLog2 && y <= 0) continue;
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  }
  const bool empty = !(xmax >= xmin);
  if (empty) {
    xmin = 0;
    xmax = 1;
    ymin = 0;
    ymax = 1;
  }
  Axis ax = make_linear_axis(xmin >= 0 && xmin <= (xmax - xmin) * 0.05 ? 0.0 : xmin, xmax, 8);
  Axis ay;
  if (c.y_scale == YScale::kLog2) {
    ay = make_log2_axis(ymin, ymax);
  } else {
    // 4% headroom so no line runs along the frame; never below zero for positive data.
    const double pad = (ymax - ymin) * 0.04;
    const bool zero = ymin >= 0 && (c.y_from_zero || ymin - pad < 0);
    ay = make_linear_axis(zero ? 0.0 : ymin - pad, ymax + pad, 6);
  }
  ax.p0 = x0;
  ax.p1 = x1;
  ay.p0 = y1;
  ay.p1 = y0;

  std::string o;
  if (standalone) o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" id=\"" + xml_escape(c.id) +
       "\" viewBox=\"0 0 " + std::to_string(c.width) + " " + std::to_string(c.height) + "\" width=\"" +
       std::to_string(c.width) + "\" height=\"" + std::to_string(c.height) + "\" font-family=\"" + kFont +
       "\" font-size=\"12\" role=\"img\">\n";
  o += "<title>" + xml_escape(c.title) + "</title>\n";
  if (standalone) o += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  o += "<defs><clipPath id=\"" + xml_escape(c.id) + "-plot\"><rect x=\"" + num(x0) + "\" y=\"" + num(y0 - 4) +
       "\" width=\"" + num(x1 - x0) + "\" height=\"" + num(y1 - y0 + 8) + "\"/></clipPath></defs>\n";
  o += "<text x=\"" + num(x0) + "\" y=\"20\" font-size=\"15\" font-weight=\"600\" fill=\"#1a1a1a\">" +
       xml_escape(c.title) + "</text>\n";

  // Legend under the title.
  {
    double lx = 0;
    int row = 0;
    for (const auto& e : c.legend) {
      const double w = 30 + e.label.size() * kCharWidth + 18;
      if (lx > 0 && lx + w > plot_w) {
        ++row;
        lx = 0;
      }
      const double y = kTitleHeight + row * kLegendRow + 6;
      const double x = x0 + lx;
      o += "<line x1=\"" + num(x) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x + 24) + "\" y2=\"" + num(y) +
           "\" stroke=\"" + xml_escape(e.color) + "\" stroke-width=\"2.5\"" +
           (e.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>";
      o += "<text x=\"" + num(x + 30) + "\" y=\"" + num(y + 4) + "\" fill=\"#333333\">" +
           xml_escape(e.label) + "</text>\n";
      lx += w;
    }
  }

  // Grid and ticks.
  o += "<g class=\"grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">";
  for (double t : ax.ticks)
    o += "<line x1=\"" + num(ax.at(t)) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(ax.at(t)) + "\" y2=\"" +
         num(y1) + "\"/>";
  for (double t : ay.ticks) {
    const double py = ay.at(t);
    o +=
        "<line x1=\"" + num(x0) + "\" y1=\"" + num(py) + "\" x2=\"" + num(x1) + "\" y2=\"" + num(py) + "\"/>";
  }
  o += "</g>\n<g class=\"ticks\" fill=\"#555555\">";
  for (double t : ax.ticks) {
    const double px = ax.at(t);
    o += "<text x=\"" + num(px) + "\" y=\"" + num(y1 + 18) + "\" text-anchor=\"middle\">" +
         xml_escape(tick_label(ax, t, c.x_si)) + "</text>";
  }
  for (double t : ay.ticks) {
    const double py = ay.at(t);
    o += "<text x=\"" + num(x0 - 8) + "\" y=\"" + num(py + 4) + "\" text-anchor=\"end\">" +
         xml_escape(tick_label(ay, t, c.y_si)) + "</text>";
  }
  o += "</g>\n";
  o += "<rect x=\"" + num(x0) + "\" y=\"" + num(y0) + "\" width=\"" + num(x1 - x0) + "\" height=\"" +
       num(y1 - y0) + "\" fill=\"none\" stroke=\"#999999\" stroke-width=\"1\"/>\n";
  o += "<text x=\"" + num((x0 + x1) / 2) + "\" y=\"" + num(c.height - 12.0) +
       "\" text-anchor=\"middle\" fill=\"#333333\">" + xml_escape(c.x_label) + "</text>\n";
  o += "<text transform=\"translate(18 " + num((y0 + y1) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\" fill=\"#333333\">" + xml_escape(c.y_label) + "</text>\n";
  if (empty)
    o += "<text x=\"" + num((x0 + x1) / 2) + "\" y=\"" + num((y0 + y1) / 2) +
         "\" text-anchor=\"middle\" fill=\"#999999\">no data</text>\n";

  // Series.
  o += "<g clip-path=\"url(#" + xml_escape(c.id) +
       "-plot)\" fill=\"none\" stroke-width=\"1.8\" "
       "stroke-linejoin=\"round\" stroke-linecap=\"round\">\n";
  for (const auto& s : c.series) {
    std::string pts;
    pts.reserve(s.points.size() * 14);
    std::string dots;
    for (const auto& [x, y] : s.points) {
      if (!pts.empty()) pts += ' ';
      const double px = ax.pixel(x);
      const double py = (c.y_scale == YScale::kLog2 && y <= 0) ? y1 : ay.pixel(y);
      pts += num(px) + "," + num(py);
      if (s.markers || s.points.size() < 2)
        dots += "<circle cx=\"" + num(px) + "\" cy=\"" + num(py) + "\" r=\"2.8\"/>";
    }
    o += "<polyline class=\"series\"";
    for (const auto& [k, v] : s.attributes) o += " " + k + "=\"" + xml_escape(v) + "\"";
    o += " stroke=\"" + xml_escape(s.color) + "\"" + (s.dashed ? " stroke-dasharray=\"6 4\"" : "") +
         " points=\"" + pts + "\"><title>" + xml_escape(s.label) + "</title></polyline>\n";
    if (!dots.empty()) o += "<g fill=\"" + xml_escape(s.color) + "\" stroke=\"none\">" + dots + "</g>\n";
  }
  o += "</g>\n</svg>\n";
  return o;
}

}  // namespace mptrain::report
