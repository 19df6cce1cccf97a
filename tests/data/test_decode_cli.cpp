// Ids typed on the command line: cli/token_ids.h's parser (shared by `tokenize --decode` and
// `tokenizer decode`) and the GPT-2 decoder end to end through the binary.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/token_ids.h"
#include "common/test_util.h"
#include "core/error.h"
#include "data/data_test_util.h"

namespace mptrain {
namespace {

using testing::expect_clear_error;
using testing::run_mptrain;
using testing::RunResult;

TEST(TokenIds, SpacesAndCommasSeparateIds) {
  EXPECT_EQ(parse_token_ids("15496, 11 995", "decode"), (std::vector<int>{15496, 11, 995}));
  EXPECT_EQ(parse_token_ids(" 1,,2 ,3 ", "decode"), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(parse_token_ids("  ", "decode").empty());
  EXPECT_EQ(parse_token_ids("-1", "decode"), std::vector<int>{-1});  // range is the decoder's check
}

TEST(TokenIds, AWordThatIsNotAWholeIntegerIsNamed) {
  for (const std::string bad : {"12x", "x1", "1.5", "99999999999999999999"}) {
    try {
      parse_token_ids("7 " + bad, "tokenize --decode");
      FAIL() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "tokenize --decode: '" + bad + "' is not a token id");
    }
  }
}

TEST(DecodeCli, Gpt2IdsBackToText) {
  MPT_REQUIRE_VOCAB(vocab);
  const RunResult r = run_mptrain("tokenize --decode --vocab-dir " + vocab + " --text '15496, 11 995'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "Hello, world");
}

TEST(DecodeCli, NotAnIdAndOutOfVocabularyAreOneClearError) {
  MPT_REQUIRE_VOCAB(vocab);
  expect_clear_error(run_mptrain("tokenize --decode --vocab-dir " + vocab + " --text '15496 x1'"),
                     "tokenize --decode: 'x1' is not a token id");
  expect_clear_error(run_mptrain("tokenize --decode --vocab-dir " + vocab + " --text '99999999'"),
                     "outside the vocabulary");
}

}  // namespace
}  // namespace mptrain
