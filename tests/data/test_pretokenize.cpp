// GPT-2's pre-tokeniser, rule by rule: contractions, letters, numbers, other
// symbols, the two whitespace alternatives, Unicode classes, the White_Space set,
// invalid UTF-8 (cut like GPT-2 cuts the U+FFFD-replaced text, bytes kept), the
// WHATWG replacement itself, long runs, and random bytes. Expected pieces come from
// OpenAI's encoder.py pattern run by Python's `regex` module on the same text.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "data/pretokenize.h"

namespace mptrain {
namespace {

using Pieces = std::vector<std::string>;

const Gpt2Pretokenizer& pretok() {
  static const Gpt2Pretokenizer p;
  return p;
}

Pieces split(const std::string& text) {
  Pieces out;
  for (std::string_view v : pretok().split(text)) out.emplace_back(v);
  return out;
}

struct Case {
  const char* rule;
  std::string text;
  Pieces want;
};

void check_cases(const std::vector<Case>& cases) {
  for (const auto& c : cases) EXPECT_EQ(split(c.text), c.want) << c.rule << ": '" << c.text << "'";
}

TEST(Pretokenize, Contractions) {
  check_cases({
      {"'s", "it's", {"it", "'s"}},
      {"'t", "can't", {"can", "'t"}},
      {"'re", "you're", {"you", "'re"}},
      {"'ve", "we've", {"we", "'ve"}},
      {"'m", "I'm", {"I", "'m"}},
      {"'ll", "they'll", {"they", "'ll"}},
      {"'d", "she'd", {"she", "'d"}},
      {"a contraction is a prefix match", "'sup", {"'s", "up"}},
      {"case-sensitive: 'S is no contraction", "HE'S", {"HE", "'", "S"}},
      {"lone quotes are symbols", "rock 'n' roll", {"rock", " '", "n", "'", " roll"}},
      {"no space before a contraction", "x 's", {"x", " '", "s"}},
  });
}

TEST(Pretokenize, LettersNumbersSymbols) {
  check_cases({
      {"letters take one leading space", " hello world", {" hello", " world"}},
      {"only one space joins", "  hello", {" ", " hello"}},
      {"letters and digits part", "abc123def", {"abc", "123", "def"}},
      {"numbers take one leading space", "12345 678", {"12345", " 678"}},
      {"a decimal point is a symbol", "3.14", {"3", ".", "14"}},
      {"superscript two is a number (No)", "x\xC2\xB2", {"x", "\xC2\xB2"}},
      {"Roman numeral twelve is a number (Nl)",
       "\xE2\x85\xAB"
       "a",
       {"\xE2\x85\xAB", "a"}},
      {"Arabic-Indic digits", "\xD9\xA3\xD9\xA4 x", {"\xD9\xA3\xD9\xA4", " x"}},
      {"symbols run together", "a...b!?", {"a", "...", "b", "!?"}},
      {"symbols take one leading space", "x ?!", {"x", " ?!"}},
      {"accented letters", "caf\xC3\xA9 na\xC3\xAFve", {"caf\xC3\xA9", " na\xC3\xAFve"}},
      {"Cyrillic",
       "\xD0\x9F\xD1\x80\xD0\xB8 \xD0\xBC\xD0\xB8\xD1\x80",
       {"\xD0\x9F\xD1\x80\xD0\xB8", " \xD0\xBC\xD0\xB8\xD1\x80"}},
      {"CJK", " \xE4\xB8\xAD\xE6\x96\x87!", {" \xE4\xB8\xAD\xE6\x96\x87", "!"}},
      {"emoji are symbols", " \xF0\x9F\x98\x80!", {" \xF0\x9F\x98\x80!"}},
      {"a combining mark is no letter (Mn)", "e\xCC\x81", {"e", "\xCC\x81"}},
  });
}

TEST(Pretokenize, Whitespace) {
  check_cases({
      {"\\s+(?!\\S) leaves the last space to the word", "a   b", {"a", "  ", " b"}},
      {"a single newline before text is \\s+", "a\nb", {"a", "\n", "b"}},
      {"two newlines", "a\n\nb", {"a", "\n", "\n", "b"}},
      {"mixed run", "a  \n  b", {"a", "  \n ", " b"}},
      {"tabs never join words", "\t\tx", {"\t", "\t", "x"}},
      {"trailing whitespace is one piece", "end  \n ", {"end", "  \n "}},
      {"only whitespace", " \t\n", {" \t\n"}},
      {"NBSP is whitespace",
       "a\xC2\xA0"
       "b",
       {"a", "\xC2\xA0", "b"}},
      {"ideographic space",
       "a\xE3\x80\x80\xE3\x80\x80"
       "b",
       {"a", "\xE3\x80\x80", "\xE3\x80\x80", "b"}},
      // Unicode White_Space, as Python's regex (GPT-2) has it; node's \s differs on these two.
      {"U+0085 is whitespace", "a \xC2\x85!", {"a", " ", "\xC2\x85", "!"}},
      {"U+FEFF is not", "x \xEF\xBB\xBFy", {"x", " \xEF\xBB\xBF", "y"}},
      // PCRE2's UCP \s takes U+180E; White_Space has not since Unicode 6.3.
      {"U+180E is not", "a \xE1\xA0\x8E b", {"a", " \xE1\xA0\x8E", " b"}},
  });
}

TEST(Pretokenize, InvalidUtf8CutsLikeReplacedText) {
  check_cases({
      {"a lone invalid byte",
       "a\xFF"
       "b",
       {"a", "\xFF", "b"}},
      {"invalid bytes join symbols", "!\xFF?", {"!\xFF?"}},
      {"and take one leading space", " \xFE\xFF", {" \xFE\xFF"}},
      {"truncated sequence at the end", "ab\xC3", {"ab", "\xC3"}},
      {"Latin-1 inside UTF-8", "\xC3\xA9t\xE9", {"\xC3\xA9t", "\xE9"}},
      {"Latin-1 word", "caf\xE9 bar", {"caf", "\xE9", " bar"}},
      {"truncated three-byte sequence", " \xE2\x82", {" \xE2\x82"}},
      {"encoded surrogate", "x \xED\xA0\x80y", {"x", " \xED\xA0\x80", "y"}},
      {"apostrophe after invalid byte", "it\xFF's", {"it", "\xFF'", "s"}},
      {"invalid then number", "\xFF\xFE 12", {"\xFF\xFE", " 12"}},
      {"NUL and controls are symbols",
       std::string("a\0\x01"
                   "b",
                   4),
       {"a", std::string("\0\x01", 2), "b"}},
  });
}

TEST(Pretokenize, ReplaceInvalidUtf8FollowsWhatwg) {
  const std::string R = "\xEF\xBF\xBD";
  struct Rep {
    std::string in, out;
  };
  const std::vector<Rep> reps = {
      {"plain ascii", "plain ascii"},
      {"caf\xC3\xA9 \xF0\x9F\x98\x80", "caf\xC3\xA9 \xF0\x9F\x98\x80"},
      {"\xFF", R},
      {"\xE2\x82", R},  // maximal subpart: one replacement
      {"\xE2\x82x", R + "x"},
      {"\xF0\x9F\x98", R},                  // truncated emoji
      {"\xF0\x80\x80", R + R + R},          // F0 needs 90..BF next: three
      {"\xC0\xAF", R + R},                  // overlong
      {"\xED\xA0\x80", R + R + R},          // surrogate
      {"\xF4\x90\x80\x80", R + R + R + R},  // above U+10FFFF
      {"\xC3", R},
      {"a\x80"
       "b",
       "a" + R + "b"},
  };
  for (const auto& r : reps) {
    EXPECT_EQ(replace_invalid_utf8(r.in), r.out) << "'" << r.in << "'";
    EXPECT_EQ(find_invalid_utf8(r.in) == std::string_view::npos, r.in == r.out) << "'" << r.in << "'";
  }
  EXPECT_EQ(find_invalid_utf8("0123456789abcdef\xFF"), 16u);  // after the 8-byte fast path
  EXPECT_EQ(find_invalid_utf8("abc\xC3\xA9\xC3"), 5u);
}

TEST(Pretokenize, LongRunsAreOnePiece) {
  const size_t n = 1 << 20;
  EXPECT_EQ(split(std::string(n, ' ')), Pieces{std::string(n, ' ')});
  EXPECT_EQ(split(std::string(n, 'a')), Pieces{std::string(n, 'a')});
  EXPECT_EQ(split(std::string(n, '7')), Pieces{std::string(n, '7')});
  EXPECT_EQ(split(std::string(n, '=')), Pieces{std::string(n, '=')});
  EXPECT_EQ(split(std::string(n, '\xFF')), Pieces{std::string(n, '\xFF')});
  // A long run of spaces before a word leaves one space to the word.
  EXPECT_EQ(split(std::string(n, ' ') + "x"), (Pieces{std::string(n - 1, ' '), " x"}));
}

// Random byte strings from `ascii` and a fixed set of UTF-8 lead, continuation and invalid bytes,
// split by `p`: pieces are contiguous and never empty, and the U+FFFD-replaced text splits into
// the replaced pieces, one for one.
void check_random_bytes(const Gpt2Pretokenizer& p, unsigned seed, const std::string& ascii) {
  std::mt19937 rng(seed);
  const std::string alphabet = ascii + "\x80\xBF\xC3\xA9\xE2\x82\xAC\xF0\x9F\xFF\xED\xA0";
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1), len(0, 40);
  for (int it = 0; it < 3000; ++it) {
    std::string s;
    for (size_t k = len(rng); k > 0; --k) s.push_back(alphabet[pick(rng)]);
    const auto pieces = p.split(s);
    std::string joined;
    for (auto piece : pieces) {
      ASSERT_FALSE(piece.empty()) << "'" << s << "'";
      joined += piece;
    }
    ASSERT_EQ(joined, s);
    const std::string replaced = replace_invalid_utf8(s);  // the views below point into it
    const auto rp = p.split(replaced);
    ASSERT_EQ(rp.size(), pieces.size()) << "'" << s << "'";
    for (size_t i = 0; i < rp.size(); ++i) ASSERT_EQ(std::string(rp[i]), replace_invalid_utf8(pieces[i]));
  }
}

TEST(Pretokenize, RandomBytesSplitIntoContiguousPieces) {
  // Bytes drawn to hit every class often: ASCII, continuation and lead bytes, spaces.
  check_random_bytes(pretok(), 1234, std::string("aZ9 '\n\t!.", 9));
}

// Split steps beyond GPT-2's (Hugging Face's Split, behavior Isolated): matches and the text
// between them become pieces, empty matches none, steps cut the pieces of the step before, and no
// step leaves the text whole.
Pieces split_with(const std::vector<std::string>& patterns, const std::string& text) {
  const Gpt2Pretokenizer p(patterns);
  Pieces out;
  for (std::string_view v : p.split(text)) out.emplace_back(v);
  return out;
}

TEST(Pretokenize, SplitStepsIsolateMatchesAndTheTextBetween) {
  EXPECT_EQ(split_with({"x+"}, "aaxxbxc"), (Pieces{"aa", "xx", "b", "x", "c"}));
  EXPECT_EQ(split_with({"x+"}, "xx"), (Pieces{"xx"}));
  EXPECT_EQ(split_with({"x+"}, "abc"), (Pieces{"abc"}));
  EXPECT_EQ(split_with({"x*"}, "axxb"), (Pieces{"a", "xx", "b"})) << "an empty match makes no piece";
  EXPECT_EQ(split_with({"(?=b)"}, "abab"), (Pieces{"abab"})) << "only empty matches";
  EXPECT_EQ(split_with({"\\p{N}", kGpt2SplitPattern}, "ab 12 cd"), (Pieces{"ab", " ", "1", "2", " cd"}));
  EXPECT_EQ(split_with({kDigitRunsPattern}, "a123b4"), (Pieces{"a", "123", "b", "4"}));
  EXPECT_EQ(split_with({}, "hello world"), (Pieces{"hello world"}));
  EXPECT_EQ(split_with({}, ""), Pieces{});
  EXPECT_EQ(split_with({"x+"}, ""), Pieces{});
  // Invalid UTF-8 is matched as U+FFFD and kept: not a letter, so it falls between the matches.
  EXPECT_EQ(split_with({"\\p{L}+"},
                       "ab\xFF\xFE"
                       "cd\xC3"),
            (Pieces{"ab", "\xFF\xFE", "cd", "\xC3"}));
  EXPECT_EQ(split_with({"\\p{L}+"}, "\xE2\x82"), (Pieces{"\xE2\x82"}));
  // Multibyte text under an empty-matching pattern advances by code points, not bytes.
  EXPECT_EQ(split_with({"\\d*"}, "\u00e9\u00e912"), (Pieces{"\u00e9\u00e9", "12"}));
}

// Llama 3's pattern (PCRE2 form, as hf_tokenizer_json.cpp writes it) on random bytes.
TEST(Pretokenize, RandomBytesUnderASplitRegexStayContiguous) {
  const Gpt2Pretokenizer llama3(
      {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
       "?[^\\p{White_Space}\\p{L}\\p{N}]+[\\r\\n]*|\\p{White_Space}*[\\r\\n]+|"
       "\\p{White_Space}+(?!\\P{White_Space})|\\p{White_Space}+"});
  check_random_bytes(llama3, 99, std::string("aZ9 '\n\r\t!.S", 12));
}

// The hand-cut ASCII path (GPT-2's pattern as it is) against PCRE2 alone (the same pattern in a
// group, which the fast path does not recognise): the same pieces on text drawn from every class
// of the pattern, ASCII and beyond, valid or not, around every decision the scanner makes
// (contractions, " ?" before a run, a run of spaces before a non-space or the end, a run that
// meets a character past ASCII).
TEST(Pretokenize, AsciiScannerCutsAsPcre2Does) {
  const Gpt2Pretokenizer fast, pcre2_only({std::string("(?:") + kGpt2SplitPattern + ")"});
  const std::vector<std::string> atoms = {
      "a", "Z", "word", "7", "42", " ", "  ", "\n", "\r\n", "\t", "\x0B", "\x0C", "\x1F", "'", "'s", "'t", "'re",
      "'ve", "'m", "'ll", "'d", "'S", "'x", "!", "?!", "-", "_", "\x7F", "\x01",
      "\xC3\xA9",          // é: a letter past ASCII
      "\xC2\xA0",          // no-break space: White_Space
      "\xE3\x80\x80",      // ideographic space
      "\xD9\xA3",          // Arabic-Indic three: a number
      "\xE2\x80\x94",      // em dash: a symbol
      "\xF0\x9F\x98\x80",  // an emoji: a symbol
      "\xC2\x85",          // NEL: White_Space
      "\xFF", "\xE2\x82"};  // invalid UTF-8
  std::mt19937 rng(2026);
  size_t pieces = 0;
  for (int doc = 0; doc < 4000; ++doc) {
    std::string text;
    const int len = 1 + static_cast<int>(rng() % 24);
    for (int k = 0; k < len; ++k) text += atoms[rng() % (doc % 2 ? atoms.size() : 29)];  // half ASCII only
    const auto a = fast.split(text), b = pcre2_only.split(text);
    ASSERT_EQ(Pieces(a.begin(), a.end()), Pieces(b.begin(), b.end())) << "text: " << testing::PrintToString(text);
    pieces += a.size();
  }
  EXPECT_GT(pieces, 30000u);
}

}  // namespace
}  // namespace mptrain
