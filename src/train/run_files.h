// The files that make a run reproducible and comparable, written into RUN_DIR when a
// run starts (metrics.jsonl, written per step, is train/metrics.h):
//   config.json   {"options": TrainOptions::to_json(), "model": the model config,
//                  "num_params", "threads", "peak_tflops", "peak_formula", "started_at"}
//                 rewritten at every start (a resumed run states its own options)
//   command.txt   the exact command line, shell-quoted so it can be pasted back; one line
//                 per start: the first is the run's own, later ones its resumes
// and the command that resumes an interrupted run.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mptrain {

// This process's arguments (argv[0] included), from /proc/self/cmdline; empty if unreadable.
std::vector<std::string> process_arguments();

// POSIX shell quoting: arguments made only of safe characters stay as they are, others
// are wrapped in single quotes ('it'"'"'s').
std::string shell_quote(const std::string& arg);
std::string shell_join(const std::vector<std::string>& args);

// The command that resumes a run: `args` with any "--resume X" / "--resume=X" removed
// and "--resume RUN_DIR" appended.
std::string resume_command(const std::vector<std::string>& args, const std::string& run_dir);

// Writes RUN_DIR/config.json (atomically) and appends the command line to RUN_DIR/command.txt.
void write_run_files(const std::string& run_dir, const nlohmann::json& config,
                     const std::vector<std::string>& args);

}  // namespace mptrain
