// What a training run shows and records, kept out of the loop itself: the progress bar or
// plain log lines (core/progress.h), metrics.jsonl (train/metrics.h), config.json and
// command.txt (train/run_files.h), MFU against the peak of train/peak_flops.h, SIGINT /
// SIGTERM (train/interrupt.h) and the final summary with the resume command.
//
// Output rules (stdout): --quiet prints only the final summary (errors go to stderr from
// main); otherwise messages (model, validation, samples, checkpoints) are permanent lines,
// a step line is printed every --log-every steps (and for the first and last step), and
// on a terminal a bar with step/total, loss, tokens/s, MFU and ETA redraws in place
// between them. --progress none drops the bar and the step lines but keeps the messages.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/progress.h"
#include "model/gpt2_config.h"
#include "precision/precision.h"
#include "train/interrupt.h"
#include "train/metrics.h"
#include "train/options.h"
#include "train/peak_flops.h"
#include "train/summary.h"

namespace mptrain {

// GPT-2's config as config.json's "model" object.
nlohmann::json gpt2_model_json(const Gpt2Config& config);

struct RunShape {
  size_t num_params = 0;
  double tokens_per_step = 0;
  double flops_per_step = 0;
  int threads = 0;
  int64_t first_step = 0;    // 0, or the step a resume starts from
  std::string resumed_from;  // checkpoint dir, or empty
  // Data parallelism: only rank 0 shows and records anything (files, lines, summary); every
  // rank keeps the signal handlers. tokens/flops_per_step are then global figures, and the
  // MFU peak counts threads x world_size.
  int rank = 0;
  int world_size = 1;
  Precision precision = Precision::Fp32;  // the MFU peak is that of this precision's GEMMs
};

class RunMonitor {
 public:
  // Estimates the peak, trims metrics.jsonl past first_step on a resume, writes config.json
  // (`model`: the model's config as its "model" object) and command.txt, opens metrics.jsonl and
  // installs the signal handlers.
  RunMonitor(const TrainOptions& options, const nlohmann::json& model, const RunShape& shape);
  ~RunMonitor();

  // A permanent message, unless --quiet.
  void say(const std::string& text);
  void sayf(const char* format, ...) __attribute__((format(printf, 2, 3)));
  // The MFU line; call after the model/batch description.
  void start();

  // True when step `done` gets a log line: every --log-every steps, the first and the last.
  bool log_due(int64_t done) const;
  // The standard log line of a step; the trainer may append feature fields (" | win rate …").
  // `tokens`: the step's tokens when the task counts them (BERT: the real ones, padding not),
  // which tok/s and MFU then read; 0 = the run's shape, B·T·accumulation·ranks.
  std::string step_line(int64_t done, float loss, float lr, double grad_norm, double seconds,
                        double tokens = 0.0) const;
  // Prints a step line (above the bar on a terminal; not with --quiet or --progress none).
  void log(const std::string& line);

  // The standard fields of step `done` (see metrics.h); features add theirs before write.
  MetricsRecord record(int64_t done, float loss, float lr, double grad_norm, double seconds,
                       double tokens = 0.0) const;
  // Writes the record and redraws the bar.
  void step_done(int64_t done, float loss, double seconds, const MetricsRecord& record, double tokens = 0.0);

  // SIGINT or SIGTERM received (0: none); checked by the loop after each step.
  int stop_requested() const { return interrupt_.requested(); }

  // The final summary (always printed) and, for a run stopped by a signal, how to resume.
  void finish(const TrainSummary& summary);

  const PeakFlops& peak() const { return peak_; }

 private:
  double mfu_of(double seconds, double tokens) const;
  // A step's tokens (step_line's `tokens`, or the shape's) and the model FLOPs they take.
  double tokens_of(double tokens) const { return tokens > 0 ? tokens : shape_.tokens_per_step; }
  double flops_of(double tokens) const {
    return shape_.tokens_per_step > 0 ? shape_.flops_per_step * tokens_of(tokens) / shape_.tokens_per_step
                                      : 0.0;
  }

  const TrainOptions& opt_;
  RunShape shape_;
  PeakFlops peak_;
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<MetricsWriter> metrics_;
  InterruptGuard interrupt_;
  double step_seconds_ = 0, step_tokens_ = 0, step_flops_ = 0;  // summed over this invocation's steps
  int64_t steps_run_ = 0;
  float last_loss_ = 0;
};

}  // namespace mptrain
