// Running a child process and reading its "RESULT key=value ..." line (child_result.h).
#include "bench/child_result.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace mptrain {

namespace fs = std::filesystem;

double ChildResult::field(const char* key) const {
  const std::string text = text_field(key);
  return text.empty() ? 0.0 : std::atof(text.c_str());
}

std::string ChildResult::text_field(const char* key) const {
  const std::string k = std::string(" ") + key + "=";
  const size_t at = result_line.find(k);
  if (at == std::string::npos) return "";
  const size_t b = at + k.size();
  return result_line.substr(b, result_line.find_first_of(" \r\n", b) - b);
}

ChildResult run_child(const std::string& command, const std::function<void(const char* line)>& echo) {
  std::fflush(stdout);  // the child's echoed lines come after ours
  FILE* pipe = ::popen(command.c_str(), "r");
  MPT_CHECK(pipe != nullptr, "cannot start a child process: " + command);
  std::array<char, 4096> buf{};
  ChildResult r;
  while (std::fgets(buf.data(), buf.size(), pipe)) {
    const char* line = buf.data();
    if (echo) echo(line);
    if (std::strncmp(line, "RESULT ", 7) == 0) r.result_line = line;
    r.last_line = line;
  }
  r.exit_status = ::pclose(pipe);
  while (!r.last_line.empty() && (r.last_line.back() == '\n' || r.last_line.back() == '\r'))
    r.last_line.pop_back();
  return r;
}

std::string default_peer_script(const std::string& name) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  // Beside an in-tree build directory, where `cmake --install` puts them (P/bin/mptrain:
  // P/share/mptrain/bench), in the working directory, or in the source tree the binary was built
  // from (a build directory elsewhere, BUILD_DIR=/tmp/b scripts/build.sh).
  const fs::path prefix = exe.parent_path().parent_path();
  for (const fs::path& base : {prefix, prefix / "share/mptrain", fs::current_path(), fs::path(MPTRAIN_SOURCE_DIR)}) {
    const fs::path p = base / "bench" / name;
    if (fs::exists(p)) return p.string();
  }
  return "";
}

}  // namespace mptrain
