// Child processes whose output carries a machine-readable "RESULT key=value ..." line: the
// PyTorch peers (bench/pytorch_*.py) and `mptrain bench --result-line` (the CPU ladder's rungs).
// One runner and one parser for every caller (bench/bench.cpp).
#pragma once
#include <functional>
#include <string>

namespace mptrain {

struct ChildResult {
  int exit_status = 0;      // pclose's status (0 = success)
  std::string result_line;  // the last line that starts with "RESULT " ("" when none)
  std::string last_line;    // the last line printed, newline removed (the reason when it failed)
  // A numeric field of result_line ("ms_per_step" in "RESULT ms_per_step=12.5 ..."); 0 when absent.
  double field(const char* key) const;
  // A text field of result_line, up to the next space ("" when absent).
  std::string text_field(const char* key) const;
  bool ok() const { return exit_status == 0 && !result_line.empty(); }
};

// Runs `command` through the shell (popen; append 2>&1 to collect its errors too) and returns
// its status and RESULT line; `echo` (nullable) sees every output line as it comes. Throws Error
// when the process cannot be started.
ChildResult run_child(const std::string& command,
                      const std::function<void(const char* line)>& echo = nullptr);

// bench/<name> next to the build (the executable's grandparent) or under the working directory;
// "" when neither exists.
std::string default_peer_script(const std::string& name);

}  // namespace mptrain
