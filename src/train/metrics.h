// RUN_DIR/metrics.jsonl: one JSON object per line, one line per optimizer step.
//
// A record is assembled in one place per step (the trainer) from named fields, in the
// order they are added; features add their own fields without touching the others
// (fp16 adds "loss_scale" and "skipped_steps", Sophia its "win_rate"). Fields the
// trainer writes today:
//   step, tokens (seen so far), train_loss, lr, grad_norm, ms (step time),
//   tokens_per_s, tflops (achieved), mfu (fraction of the peak of train/peak_flops.h),
//   peak_rss_mb (resident-memory high-water mark, VmHWM), elapsed_s (wall time since the
//   start of this invocation), val_loss (only on steps that validate).
// Floats are written with 9 significant digits (a float round-trips exactly); a NaN or
// infinity is written as null, since JSON has no spelling for them.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mptrain {

class MetricsRecord {
 public:
  MetricsRecord& add(std::string_view key, int64_t value);
  MetricsRecord& add(std::string_view key, int value) { return add(key, static_cast<int64_t>(value)); }
  MetricsRecord& add(std::string_view key, double value);  // %.9g; NaN/inf -> null
  MetricsRecord& add(std::string_view key, float value) { return add(key, static_cast<double>(value)); }
  MetricsRecord& add(std::string_view key, bool value);
  MetricsRecord& add_string(std::string_view key, std::string_view value);
  // Replaces the value of an existing key, or adds it.
  MetricsRecord& set(std::string_view key, double value);

  bool has(std::string_view key) const;
  std::string to_json_line() const;  // "{...}" without the newline

 private:
  MetricsRecord& put(std::string_view key, std::string value);
  std::vector<std::pair<std::string, std::string>> fields_;  // key, JSON text of the value
};

// Appends records to RUN_DIR/metrics.jsonl, flushing each (a killed run keeps every
// finished step).
class MetricsWriter {
 public:
  explicit MetricsWriter(const std::string& run_dir);
  void write(const MetricsRecord& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

// Drops the records of steps after `last_step` from RUN_DIR/metrics.jsonl (atomically):
// a run resumed in its own directory from an earlier checkpoint (after a crash or a kill)
// would otherwise hold those steps twice. Unparseable lines (a torn last line) go too.
// Does nothing when the file does not exist.
void trim_metrics(const std::string& run_dir, int64_t last_step);

// The process's resident-memory high-water mark in bytes (VmHWM of /proc/self/status);
// 0 when unavailable.
uint64_t peak_rss_bytes();
// Its resident memory now (VmRSS); 0 when unavailable.
uint64_t resident_bytes();

}  // namespace mptrain
