// The seed corpora of the fuzz targets (fuzz/corpus/<target>/) as test cases, so that the
// ordinary suite holds every parser to them: files named valid_* must be accepted, every other
// file (bad_*, and regress_* — inputs a fuzzer or sanitizer run once crashed on) must be
// rejected with mptrain::Error. docs/HARDENING.md describes the corpora.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace mptrain::testing {

// (file name, contents) of every file in fuzz/corpus/<target>/, sorted by name.
inline std::vector<std::pair<std::string, std::string>> fuzz_corpus(const std::string& target) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::filesystem::path dir = std::filesystem::path(MPTRAIN_SOURCE_DIR) / "fuzz" / "corpus" / target;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    out.emplace_back(entry.path().filename().string(), ss.str());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Feeds every corpus file of `target` to `parse` and checks the naming rule above; returns how
// many files were valid_*, so that callers can check the corpus still reaches the accepting path.
inline int check_fuzz_corpus(const std::string& target, const std::function<void(const std::string&)>& parse) {
  int valid = 0;
  for (const auto& [name, bytes] : fuzz_corpus(target)) {
    SCOPED_TRACE("fuzz/corpus/" + target + "/" + name);
    if (name.rfind("valid", 0) == 0) {
      EXPECT_NO_THROW(parse(bytes));
      ++valid;
    } else {
      EXPECT_THROW(parse(bytes), mptrain::Error);
    }
  }
  EXPECT_GT(valid, 0) << "fuzz/corpus/" << target << " holds no valid_* seed";
  return valid;
}

}  // namespace mptrain::testing
