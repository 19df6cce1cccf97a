// The training run's display, records and clean stop (see run_monitor.h).
#include "train/run_monitor.h"

#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "io/checkpoint_dir.h"
#include "train/run_files.h"

namespace mptrain {

namespace {

std::string iso_time_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json run_config(const TrainOptions& opt, const nlohmann::json& model, const RunShape& s,
                          const PeakFlops& peak) {
  nlohmann::json options = opt.to_json();
  options["log_every"] = opt.log_every;
  options["run_dir"] = opt.run_dir;
  options["resume"] = opt.resume;
  return {{"options", options},
          {"model", model},
          {"num_params", s.num_params},
          {"tokens_per_step", s.tokens_per_step},
          {"flops_per_step", s.flops_per_step},
          {"threads", s.threads},
          {"world_size", s.world_size},
          {"peak_tflops", peak.tflops},
          {"peak_formula", peak.formula},
          {"resumed_from", s.resumed_from},
          {"started_at", iso_time_utc()}};
}

}  // namespace

nlohmann::json gpt2_model_json(const Gpt2Config& c) {
  return {{"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"n_embd", c.n_embd},
          {"vocab_size", c.vocab_size},
          {"padded_vocab_size", c.padded_vocab_size},
          {"block_size", c.block_size}};
}

RunMonitor::RunMonitor(const TrainOptions& options, const nlohmann::json& model, const RunShape& shape)
    : opt_(options),
      shape_(shape),
      peak_(cpu_peak_flops(shape.threads * shape.world_size, options.peak_tflops, shape.precision)) {
  const bool root = shape.rank == 0;
  if (root && !shape.resumed_from.empty()) trim_metrics(opt_.run_dir, shape.first_step);
  if (root) write_run_files(opt_.run_dir, run_config(opt_, model, shape_, peak_), process_arguments());
  if (root) metrics_ = std::make_unique<MetricsWriter>(opt_.run_dir);
  progress_ = std::make_unique<Progress>(
      Progress::Config{.label = "train",
                       .total = static_cast<double>(opt_.steps),
                       .mode = opt_.quiet || !root ? ProgressMode::kNone : opt_.progress,
                       .out = stdout,
                       .line_seconds = 0});
}

RunMonitor::~RunMonitor() = default;

void RunMonitor::say(const std::string& text) {
  if (!opt_.quiet && shape_.rank == 0) progress_->print(text);
}

void RunMonitor::sayf(const char* format, ...) {
  if (opt_.quiet || shape_.rank != 0) return;
  char buf[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  progress_->print(buf);
}

void RunMonitor::start() {
  if (peak_.tflops > 0)
    sayf("MFU against a peak of %.3f TFLOP/s = %s%s", peak_.tflops, peak_.formula.c_str(),
         peak_.user_given ? "" : " (an estimate; set --peak-tflops)");
  else
    sayf("MFU not shown: %s", peak_.formula.c_str());
}

double RunMonitor::mfu_of(double seconds, double tokens) const {
  return seconds > 0 ? mfu(flops_of(tokens) / seconds, peak_) : 0.0;
}

bool RunMonitor::log_due(int64_t done) const {
  return done % opt_.log_every == 0 || done == opt_.steps || done == shape_.first_step + 1;
}

std::string RunMonitor::step_line(int64_t done, float loss, float lr, double grad_norm, double seconds,
                                  double tokens) const {
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "step %6lld/%lld | loss %.6f | lr %.3e | norm %.4f | %8.1f ms | %9.0f tok/s | %.3f TFLOP/s | "
                "MFU %5.2f%% "
                "| ETA %s",
                (long long)done, (long long)opt_.steps, loss, lr, grad_norm, seconds * 1e3,
                tokens_of(tokens) / seconds, flops_of(tokens) / seconds / 1e12,
                mfu_of(seconds, tokens) * 100.0,
                format_duration(progress_->eta_seconds(static_cast<double>(done))).c_str());
  return buf;
}

void RunMonitor::log(const std::string& line) {
  if (progress_->mode() != ProgressMode::kNone) progress_->print(line);
}

MetricsRecord RunMonitor::record(int64_t done, float loss, float lr, double grad_norm, double seconds,
                                 double tokens) const {
  MetricsRecord r;
  r.add("step", done)
      .add("tokens", static_cast<int64_t>(shape_.tokens_per_step * static_cast<double>(done)))
      .add("train_loss", loss)
      .add("lr", lr)
      .add("grad_norm", grad_norm)
      .add("ms", seconds * 1e3)
      .add("tokens_per_s", tokens_of(tokens) / seconds)
      .add("tflops", flops_of(tokens) / seconds / 1e12)
      .add("mfu", mfu_of(seconds, tokens))
      .add("peak_rss_mb", static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0))
      .add("elapsed_s", progress_->elapsed_seconds());
  return r;
}

void RunMonitor::step_done(int64_t done, float loss, double seconds, const MetricsRecord& record,
                           double tokens) {
  if (metrics_) metrics_->write(record);
  step_seconds_ += seconds;
  step_tokens_ += tokens_of(tokens);
  step_flops_ += flops_of(tokens);
  ++steps_run_;
  last_loss_ = loss;
  char status[160];
  std::snprintf(status, sizeof(status), "step %lld/%lld | loss %.4f | %s tok/s | MFU %.2f%%", (long long)done,
                (long long)opt_.steps, loss, format_si(tokens_of(tokens) / seconds).c_str(),
                mfu_of(seconds, tokens) * 100.0);
  progress_->draw(static_cast<double>(done), status);
}

void RunMonitor::finish(const TrainSummary& s) {
  progress_->finish();
  if (shape_.rank != 0) return;
  const double tok_s = step_seconds_ > 0 ? step_tokens_ / step_seconds_ : 0.0;
  const double avg_mfu = step_seconds_ > 0 ? mfu(step_flops_ / step_seconds_, peak_) : 0.0;
  std::string line;
  char buf[512];
  if (s.stopped_by_signal)
    std::snprintf(buf, sizeof(buf), "stopped by %s after step %lld/%lld", signal_name(s.stopped_by_signal),
                  (long long)s.steps_done, (long long)opt_.steps);
  else
    std::snprintf(buf, sizeof(buf), "done: %lld/%lld steps", (long long)s.steps_done, (long long)opt_.steps);
  line = buf;
  std::snprintf(buf, sizeof(buf), " in %s | train loss %.4f",
                format_duration(progress_->elapsed_seconds()).c_str(), s.final_train_loss);
  line += buf;
  if (s.final_val_loss >= 0) {
    std::snprintf(buf, sizeof(buf), " | val loss %.4f", s.final_val_loss);
    line += buf;
  }
  std::snprintf(buf, sizeof(buf), " | %s tok/s | MFU %.2f%% | peak memory %.0f MB", format_si(tok_s).c_str(),
                avg_mfu * 100.0, static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0));
  line += buf;
  std::printf("%s\n", line.c_str());
  if (!s.last_checkpoint.empty()) std::printf("checkpoint: %s\n", s.last_checkpoint.c_str());
  if (s.stopped_by_signal) {
    std::printf("resume with:\n  %s\n", resume_command(process_arguments(), opt_.run_dir).c_str());
    // A rank sees only its own command line, not the launcher's in front of it.
    if (shape_.world_size > 1)
      std::printf("under your launcher, as before (e.g. mpirun -np %d ...); any number of ranks can resume\n",
                  shape_.world_size);
    std::printf("(exit status %d = 128 + %s)\n", exit_status_for_signal(s.stopped_by_signal),
                signal_name(s.stopped_by_signal));
  }
  std::fflush(stdout);
}

}  // namespace mptrain
