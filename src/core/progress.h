// The live progress display shared by `prepare`, `train`, `bench` and `eval`.
//
// On a terminal it is one bar that redraws in place ("\r" + text + ESC[K, at most ten
// times a second, cut to the terminal's width so it never wraps); anything printed
// through print() appears above the bar, which comes back at the next draw(). When the
// stream is not a terminal (a log file, CI, a pipe) there is no bar: draw() prints a
// plain line every `line_seconds` (0: never; callers such as the trainer then print
// their own lines every N steps through print()). kNone shows no progress at all, but
// print() still prints: what to say and what to keep quiet is the caller's decision.
//
// The ETA is the remaining work over the rate measured since the first draw() (so a
// slow start-up does not count), shown as m:ss or h:mm:ss.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

namespace mptrain {

enum class ProgressMode { kAuto, kBar, kLines, kNone };  // kAuto: a bar on a terminal, lines otherwise

// "auto", "bar", "lines", "none" (the spelling of the --progress flags); throws Error otherwise.
ProgressMode parse_progress_mode(std::string_view name);

// 42 -> "0:42", 3725 -> "1:02:05"; negative or non-finite -> "?".
std::string format_duration(double seconds);

// 1234567 -> "1.23M", 12345 -> "12.3k", 12 -> "12" (three significant digits).
std::string format_si(double value);

class Progress {
 public:
  struct Config {
    std::string label;  // first word of every bar and line: "train", "prepare"
    double total = 0;   // units of work (steps, bytes); 0: unknown (no bar fill, no ETA)
    ProgressMode mode = ProgressMode::kAuto;
    std::FILE* out = stdout;  // a terminal check is made on this stream for kAuto
    double line_seconds = 0;  // kLines: draw() prints a line this often (0: never)
  };

  explicit Progress(Config config);
  ~Progress();  // finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // kBar, kLines or kNone: kAuto resolved against the stream.
  ProgressMode mode() const { return mode_; }

  // Shows `done` of total with `status` (e.g. "loss 3.21 | 12.3k tok/s"). kBar: redraws
  // the bar (rate-limited unless force); kLines: a line when line_seconds have passed
  // since the last one (or force); kNone: nothing.
  void draw(double done, std::string_view status, bool force = false);

  // One permanent line (a newline is added unless text ends with one), in every mode;
  // on a bar the bar is cleared first and redrawn by the next draw().
  void print(std::string_view text);

  // Clears the bar, leaving the cursor at the start of an empty line. Idempotent.
  void finish();

  double elapsed_seconds() const;         // since construction
  double rate(double done) const;         // units per second since the first draw(); 0 before
  double eta_seconds(double done) const;  // remaining / rate; negative when unknown

 private:
  using Clock = std::chrono::steady_clock;
  std::string bar_text(double done, std::string_view status) const;
  int terminal_columns() const;

  Config config_;
  ProgressMode mode_;
  Clock::time_point start_;
  Clock::time_point first_draw_{}, last_output_{};
  double first_done_ = 0;
  bool drawn_once_ = false;   // draw() has been called
  bool bar_visible_ = false;  // a bar is on the current line
};

}  // namespace mptrain
