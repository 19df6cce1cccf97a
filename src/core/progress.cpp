// The progress display: mode resolution, the in-place bar, plain lines, ETA.
#include "core/progress.h"

#include "core/named.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace mptrain {

namespace {

constexpr double kBarRedrawSeconds = 0.1;  // ten redraws a second look live and cost nothing
constexpr int kMaxBarWidth = 30;
constexpr int kMinBarWidth = 10;
constexpr int kFallbackColumns = 100;  // a pseudo-terminal without a size, or COLUMNS unset

}  // namespace

ProgressMode parse_progress_mode(std::string_view name) {
  static constexpr NameTable<ProgressMode, 4> kNames{{{ProgressMode::kAuto, "auto"},
                                                      {ProgressMode::kBar, "bar"},
                                                      {ProgressMode::kLines, "lines"},
                                                      {ProgressMode::kNone, "none"}}};
  return parse_in(kNames, name, "--progress");
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long long s = std::llround(seconds);
  char buf[48];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", s / 60, s % 60);
  return buf;
}

std::string format_si(double value) {
  if (!std::isfinite(value)) return "?";
  static const char* const kSuffix[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  double v = value;
  while (std::fabs(v) >= 999.5 && i < 5) {
    v /= 1000.0;
    ++i;
  }
  char buf[32];
  const double a = std::fabs(v);
  const int decimals = i == 0 ? 0 : a < 9.995 ? 2 : a < 99.95 ? 1 : 0;
  std::snprintf(buf, sizeof(buf), "%.*f%s", decimals, v, kSuffix[i]);
  return buf;
}

Progress::Progress(Config config) : config_(std::move(config)), mode_(config_.mode), start_(Clock::now()) {
  if (mode_ == ProgressMode::kAuto)
    mode_ = ::isatty(::fileno(config_.out)) ? ProgressMode::kBar : ProgressMode::kLines;
  last_output_ = start_;
}

Progress::~Progress() { finish(); }

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

double Progress::rate(double done) const {
  if (!drawn_once_) return 0.0;
  const double dt = std::chrono::duration<double>(Clock::now() - first_draw_).count();
  return dt > 0 && done > first_done_ ? (done - first_done_) / dt : 0.0;
}

double Progress::eta_seconds(double done) const {
  if (config_.total <= 0) return -1.0;
  if (done >= config_.total) return 0.0;
  const double r = rate(done);
  return r > 0 ? (config_.total - done) / r : -1.0;
}

int Progress::terminal_columns() const {
  struct winsize ws {};
  if (::ioctl(::fileno(config_.out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    const int n = std::atoi(c);
    if (n > 0) return n;
  }
  return kFallbackColumns;
}

std::string Progress::bar_text(double done, std::string_view status) const {
  const double frac = config_.total > 0 ? std::clamp(done / config_.total, 0.0, 1.0) : 0.0;
  char pct[16];
  std::snprintf(pct, sizeof(pct), "%3d%%", static_cast<int>(frac * 100.0));
  std::string tail = std::string(pct);
  if (!status.empty()) tail += " " + std::string(status);
  if (config_.total > 0) tail += " | ETA " + format_duration(eta_seconds(done));
  // The last column stays empty: writing into it makes some terminals wrap.
  const int cols = terminal_columns() - 1;
  const int fixed = static_cast<int>(config_.label.size() + 3 + 1 + tail.size());  // "label [" "] " tail
  const int width = std::clamp(cols - fixed, kMinBarWidth, kMaxBarWidth);
  const int filled = static_cast<int>(frac * width);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < width) {
    bar += filled > 0 ? ">" : " ";
    bar.append(static_cast<size_t>(width - filled - 1), ' ');
  }
  std::string line = config_.label + " [" + bar + "] " + tail;
  if (static_cast<int>(line.size()) > cols && cols > 0) line.resize(static_cast<size_t>(cols));
  return line;
}

void Progress::draw(double done, std::string_view status, bool force) {
  const auto now = Clock::now();
  if (!drawn_once_) {
    drawn_once_ = true;
    first_draw_ = now;
    first_done_ = done;
  }
  if (mode_ == ProgressMode::kNone) return;
  const double since = std::chrono::duration<double>(now - last_output_).count();
  if (mode_ == ProgressMode::kBar) {
    if (!force && bar_visible_ && since < kBarRedrawSeconds) return;
    const std::string line = bar_text(done, status);
    std::fprintf(config_.out, "\r%s\033[K", line.c_str());
    std::fflush(config_.out);
    bar_visible_ = true;
    last_output_ = now;
    return;
  }
  if (!force && (config_.line_seconds <= 0 || since < config_.line_seconds)) return;
  std::string line = config_.label + ":";
  if (config_.total > 0) {
    char pct[16];
    std::snprintf(pct, sizeof(pct), " %d%%",
                  static_cast<int>(std::clamp(done / config_.total, 0.0, 1.0) * 100.0));
    line += pct;
  }
  if (!status.empty()) line += " | " + std::string(status);
  if (config_.total > 0) line += " | ETA " + format_duration(eta_seconds(done));
  std::fprintf(config_.out, "%s\n", line.c_str());
  std::fflush(config_.out);
  last_output_ = now;
}

void Progress::print(std::string_view text) {
  if (bar_visible_) {
    std::fputs("\r\033[K", config_.out);
    bar_visible_ = false;
  }
  std::fwrite(text.data(), 1, text.size(), config_.out);
  if (text.empty() || text.back() != '\n') std::fputc('\n', config_.out);
  std::fflush(config_.out);
}

void Progress::finish() {
  if (!bar_visible_) return;
  std::fputs("\r\033[K", config_.out);
  std::fflush(config_.out);
  bar_visible_ = false;
}

}  // namespace mptrain
