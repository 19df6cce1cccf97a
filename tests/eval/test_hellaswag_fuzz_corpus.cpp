// parse_hellaswag on raw bytes (the fuzz target's entry point), held to fuzz/corpus/hellaswag,
// and the input fuzz_hellaswag found: a number too large for a double made nlohmann throw
// out_of_range, which escaped as a non-mptrain exception and terminated the process.
#include <gtest/gtest.h>

#include <string>

#include "common/fuzz_corpus.h"
#include "core/error.h"
#include "eval/hellaswag.h"

namespace mptrain {
namespace {

TEST(HellaswagBytes, SeedCorpus) {
  testing::check_fuzz_corpus("hellaswag", [](const std::string& b) {
    for (const McExample& ex : parse_hellaswag(b, "test.jsonl")) {
      EXPECT_EQ(ex.endings.size(), 4u);
      EXPECT_GE(ex.label, 0);
      EXPECT_LT(ex.label, 4);
    }
  });
}

TEST(HellaswagBytes, LineNumbersCountBlankLines) {
  const std::string ok = R"({"ctx": "a", "endings": ["1", "2", "3", "4"], "label": 0})";
  try {
    parse_hellaswag(ok + "\n\r\n\n{", "t.jsonl");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'t.jsonl' line 4"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_hellaswag(ok, "t.jsonl").size(), 1u);  // no newline at the end
}

TEST(HellaswagBytes, NumberOverflowIsACleanError) {
  for (const std::string& text : {std::string("1e18446744073709551616:a\t"),
                                 std::string(R"({"ctx": "a", "endings": ["1", "2", "3", "4"], "label": 1e999})")}) {
    try {
      parse_hellaswag(text, "t.jsonl");
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'t.jsonl' line 1: not valid JSON"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace mptrain
