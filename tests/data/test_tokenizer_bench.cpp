// `mptrain tokenize --bench` (data/tokenizer_bench.h): alternating rounds of mptrain on 1 thread,
// on every core and the npm encoder (node), each side's median, the same token count on both
// sides, and the machine's quietness under the ratio.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "common/test_util.h"
#include "data/data_test_util.h"

namespace mptrain {
namespace {

using testing::run_mptrain;
using testing::RunResult;
using testing::TempDir;

TEST(TokenizerBench, AlternatesRoundsAndComparesMedians) {
  MPT_REQUIRE_VOCAB(vocab);
  TempDir tmp;
  std::ofstream(tmp / "a.txt") << "Hello, world!\n%\nThe quick brown fox jumps over the lazy dog.\n%\n"
                                  "  Numbers 12345 and   spaces\tand tabs.\n";
  const RunResult r = run_mptrain("tokenize --bench " + (tmp / "a.txt") + " --doc-delimiter % --rounds 2 --threads 2 "
                                  "--vocab-dir " + vocab + " --npm-script " + testing::source_dir() +
                                  "/bench/npm_encode.js");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("round 1/2: MB/s mptrain [0-9.]+ on 1 thread, [0-9.]+ on 2")))
      << r.output;
  EXPECT_NE(r.output.find("round 2/2: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(median of 2 rounds"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("quietness: load average [0-9.]+ before"))) << r.output;
  if (r.output.find("npm gpt-3-encoder:") != std::string::npos && r.output.find("skipped") == std::string::npos &&
      r.output.find("failed") == std::string::npos) {
    EXPECT_NE(r.output.find("same count"), std::string::npos) << r.output;
    EXPECT_TRUE(std::regex_search(r.output, std::regex("round 1/2: [^\\n]*, npm [0-9.]+"))) << r.output;
    EXPECT_NE(r.output.find("speed-up over npm:"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace mptrain
