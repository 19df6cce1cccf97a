// config.json, command.txt and the resume command of a run directory.
#include "train/run_files.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "io/fileutil.h"

namespace mptrain {

std::vector<std::string> process_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  return args;
}

std::string shell_quote(const std::string& arg) {
  if (arg.empty()) return "''";
  bool safe = true;
  for (char c : arg) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string_view("-_./=:,+@%").find(c) != std::string_view::npos;
    if (!ok) {
      safe = false;
      break;
    }
  }
  if (safe) return arg;
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'')
      out += "'\"'\"'";
    else
      out += c;
  }
  return out + "'";
}

std::string shell_join(const std::vector<std::string>& args) {
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) out += ' ';
    out += shell_quote(args[i]);
  }
  return out;
}

std::string resume_command(const std::vector<std::string>& args, const std::string& run_dir) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--resume") {
      ++i;  // and its value
      continue;
    }
    if (args[i].starts_with("--resume=")) continue;
    kept.push_back(args[i]);
  }
  kept.push_back("--resume");
  kept.push_back(run_dir);
  return shell_join(kept);
}

void write_run_files(const std::string& run_dir, const nlohmann::json& config,
                     const std::vector<std::string>& args) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) throw Error("cannot create run directory '" + run_dir + "': " + ec.message());
  write_file_atomic(run_dir + "/config.json", config.dump(2) + "\n");
  std::ofstream cmd(run_dir + "/command.txt", std::ios::app);
  cmd << shell_join(args) << '\n';
  if (!cmd) throw Error("cannot write '" + run_dir + "/command.txt'");
}

}  // namespace mptrain
