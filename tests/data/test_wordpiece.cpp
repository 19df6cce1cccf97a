// BERT's WordPiece tokenizer: every rule on hand-made vocabularies (cleaning, whitespace,
// punctuation, accents and case, CJK, greedy longest match with ##, unknown words, the
// word-length limit, special tokens in text, decode), vocabulary errors, the trainer
// (layout, determinism, round trip on the default corpus), and an independent Python
// implementation (tests/ref/wordpiece_ref.py, unicodedata) on thousands of lines.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "data/data_test_util.h"
#include "data/prepare.h"
#include "data/wordpiece.h"
#include "data/wordpiece_trainer.h"

namespace mptrain {
namespace {

using data_test::error_of;
using data_test::TempDir;

std::vector<std::string> base_tokens() { return {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}; }

WordpieceTokenizer make(std::vector<std::string> extra, BasicTokenizerOptions opt = {}) {
  auto t = base_tokens();
  t.insert(t.end(), extra.begin(), extra.end());
  return WordpieceTokenizer(WordpieceVocab::from_tokens(t, "test"), opt);
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

std::string basic(std::string_view text, BasicTokenizerOptions opt = {}) {
  return joined(BasicTokenizer(opt).tokenize(text));
}

TEST(WordpieceBasic, CleaningAndWhitespace) {
  // Controls (Cc, Cf: zero-width space, soft hyphen), NUL, U+FFFD and invalid UTF-8 vanish;
  // \t \n \r, NBSP, ideographic space, U+2028 separate words.
  EXPECT_EQ(basic("hel\x01lo wor\u200bld"), "hello world");
  EXPECT_EQ(basic(std::string("a\0b", 3)), "ab");
  EXPECT_EQ(basic("x\uFFFDy soft\u00ADhyphen"), "xy softhyphen");
  EXPECT_EQ(basic("bad\xff\xfe bytes\xc3"), "bad bytes");
  EXPECT_EQ(basic("one\ttwo\nthree\r\nfour\u00A0five\u3000six\u2028seven"),
            "one two three four five six seven");
  EXPECT_EQ(basic("   "), "");
}

TEST(WordpieceBasic, Punctuation) {
  // ASCII 33-47, 58-64, 91-96, 123-126 (symbols like $ ^ ` | ~ included) and Unicode P*.
  EXPECT_EQ(basic("Hello,world!"), "hello , world !");
  EXPECT_EQ(basic("$5^2 a`b|c~d"), "$ 5 ^ 2 a ` b | c ~ d");
  EXPECT_EQ(basic("«quoted» ¿qué? em—dash …"), "« quoted » ¿ que ? em — dash …");
  EXPECT_EQ(basic("don't e.g."), "don ' t e . g .");
  // Symbols that are not punctuation stay inside words: € (Sc), © (So), + is ASCII punct.
  EXPECT_EQ(basic("5€ ©2024 a+b"), "5€ ©2024 a + b");
}

TEST(WordpieceBasic, CaseAndAccents) {
  EXPECT_EQ(basic("Héllo WÖRLD naïve Crème"), "hello world naive creme");
  // Full case mapping: İ lower-cases to i + U+0307 (then stripped); Greek final sigma.
  EXPECT_EQ(basic("İSTANBUL ΣΟΦΟΣ"), "istanbul σοφος");
  EXPECT_EQ(basic("ΣΟΦΟΣ").back(), static_cast<char>(0x82));  // ς (U+03C2), not σ
  // Cased: no lower-casing, no accent stripping (BERT's default for cased vocabularies).
  BasicTokenizerOptions cased;
  cased.lower_case = false;
  EXPECT_EQ(basic("Héllo WÖRLD", cased), "Héllo WÖRLD");
  cased.strip_accents = 1;
  EXPECT_EQ(basic("Héllo WÖRLD", cased), "Hello WORLD");
  // A word of nothing but combining marks disappears.
  EXPECT_EQ(basic("a \u0301\u0308 b"), "a b");
}

TEST(WordpieceBasic, Cjk) {
  // Ideographs (also from extension B and the compatibility block) become words of their
  // own; Hangul, kana and Thai are not split.
  EXPECT_EQ(basic("你好world"), "你 好 world");
  EXPECT_EQ(basic("x\U00020000y"), "x \U00020000 y");
  BasicTokenizerOptions cased;
  cased.lower_case = false;
  EXPECT_EQ(basic("안녕하세요 ひらがな", cased), "안녕하세요 ひらがな");
  // Uncased, NFD takes Hangul syllables apart into jamo and the kana's voicing mark
  // (U+3099, Mn) is stripped: what uncased BERT does to these scripts.
  EXPECT_EQ(basic("ひらがな"), "ひらかな");
  EXPECT_EQ(basic("한"), "한");
  // U+F900 (compatibility ideograph) decomposes to U+8C48 under NFD (uncased only).
  EXPECT_EQ(basic("\uF900"), "\u8C48");
}

TEST(Wordpiece, GreedyLongestMatch) {
  // google-research/bert's own example.
  const auto tok = make({"want", "##want", "##ed", "wa", "un", "runn", "##ing", ","});
  EXPECT_EQ(joined(tok.tokenize("UNwant\u00E9d,running")), "un ##want ##ed , runn ##ing");
  // Longest first: ##ing beats ##in + ##g.
  const auto tok2 = make({"run", "##n", "##in", "##g", "##ing", "##ning"});
  EXPECT_EQ(joined(tok2.tokenize("running")), "run ##ning");
  EXPECT_EQ(joined(tok2.tokenize("runing")), "run ##ing");
  // A word without a full cover is one [UNK]; its neighbours are unaffected.
  EXPECT_EQ(joined(tok.tokenize("unwantedX running")), "[UNK] runn ##ing");
  EXPECT_EQ(joined(tok.tokenize("xyz")), "[UNK]");
  // A "##" piece never starts a word.
  EXPECT_EQ(joined(make({"##a", "b"}).tokenize("ab a")), "[UNK] [UNK]");
  // Multi-byte characters are matched by code points.
  EXPECT_EQ(joined(make({"né", "##é", "n"}, {.lower_case = false}).tokenize("néé")), "né ##é");
}

TEST(Wordpiece, MaxInputCharsPerWord) {
  const auto tok = make({"a", "##a"});
  EXPECT_EQ(tok.encode(std::string(100, 'a')).size(), 100u);
  EXPECT_EQ(joined(tok.tokenize(std::string(101, 'a'))), "[UNK]");
  // The limit counts code points, not bytes: 60 two-byte characters are 60.
  std::string e;
  for (int i = 0; i < 60; ++i) e += "é";
  const auto cased = make({"é", "##é"}, {.lower_case = false});
  EXPECT_EQ(cased.encode(e).size(), 60u);
  BasicTokenizerOptions small;
  small.max_input_chars_per_word = 3;
  EXPECT_EQ(joined(make({"a", "##a"}, small).tokenize("aaa aaaa")), "a ##a ##a [UNK]");
}

TEST(Wordpiece, SpecialTokensAndDecode) {
  const auto tok = make({"the", "of", "land", "[", "]", "mask", "##s"});
  const auto& sp = tok.special();
  EXPECT_EQ(joined(tok.tokenize("the [MASK] of")), "the [ mask ] of");  // text by default
  const auto ids = tok.encode("the [MASK] of the lands[SEP]", BertSpecialText::kRecognize);
  EXPECT_EQ(ids, (std::vector<int>{5, sp.mask, 6, 5, 7, 11, sp.sep}));
  EXPECT_EQ(tok.decode(ids), "the [MASK] of the lands [SEP]");
  EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), "the of the lands");
  EXPECT_EQ(tok.decode(std::vector<int>{sp.cls, 7, 11, sp.unk}, true), "lands [UNK]");
  EXPECT_NE(error_of([&] { tok.decode(std::vector<int>{99}); }).find("token id 99 is out of range"),
            std::string::npos);
}

TEST(Wordpiece, VocabularyErrors) {
  EXPECT_NE(error_of([] {
              WordpieceVocab::parse("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", "v.txt");
            }).find("vocabulary 'v.txt' lacks the special token(s) [MASK]"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              WordpieceVocab::parse("hello\nworld\n", "v.txt");
            }).find("lacks the special token(s) [PAD] [UNK] [CLS] [SEP] [MASK]"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { WordpieceVocab::parse("[PAD]\n[UNK]\n\n[CLS]\n", "v.txt"); }).find("line 3 is empty"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              WordpieceVocab::parse("[PAD]\na\n[UNK]\na\n", "v.txt");
            }).find("line 4: token 'a' already appears on line 2"),
            std::string::npos);
  EXPECT_NE(error_of([] { WordpieceVocab::parse("", "v.txt"); }).find("is empty"), std::string::npos);
  EXPECT_NE(error_of([] { WordpieceVocab::load("/nonexistent/vocab.txt"); }).find("/nonexistent/vocab.txt"),
            std::string::npos);
  // \r\n line ends are accepted; the id is the line number.
  const auto v = WordpieceVocab::parse("[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nhi\r\n", "crlf");
  EXPECT_EQ(v.find("hi"), 5);
  EXPECT_EQ(v.size(), 6);
}

// The default corpus' documents, or none (the test skips).
std::vector<std::string> fortunes(size_t max_docs) {
  std::vector<std::string> docs;
  if (!std::filesystem::exists("/usr/share/games/fortunes")) return docs;
  for (const auto& f : expand_inputs({"/usr/share/games/fortunes"}, {"*.dat", "*.u8"})) {
    const std::string text = read_text_file(f.path);
    for (std::string_view d : split_documents(text, "%")) {
      docs.emplace_back(d);
      if (docs.size() == max_docs) return docs;
    }
  }
  return docs;
}

TEST(WordpieceTrainer, LayoutDeterminismAndErrors) {
  const std::vector<std::string_view> texts = {"the cat sat on the mat. The cat ate!",
                                               "cats and mats; the end"};
  WordpieceTrainOptions opt;
  opt.vocab_size = 150;
  opt.min_frequency = 1;
  WordpieceTrainSummary sum;
  const WordpieceVocab a = train_wordpiece(texts, opt, &sum);
  const WordpieceVocab b = train_wordpiece(texts, opt);
  EXPECT_EQ(a.to_text(), b.to_text());
  EXPECT_EQ(a.special().pad, 0);
  EXPECT_EQ(a.special().unk, 100);
  EXPECT_EQ(a.special().cls, 101);
  EXPECT_EQ(a.special().sep, 102);
  EXPECT_EQ(a.special().mask, 103);
  EXPECT_EQ(a.token(1), "[unused0]");
  EXPECT_EQ(a.token(104), "!");  // the alphabet in code point order, then its ## forms
  EXPECT_GE(a.find("##t"), 0);
  EXPECT_GE(a.find("the"), 0);  // the most frequent word is learned
  EXPECT_GE(a.find("cat"), 0);
  EXPECT_LE(a.size(), 150);
  // Without [unused] slots: [PAD] 0 [UNK] 1 [CLS] 2 [SEP] 3 [MASK] 4.
  opt.unused_tokens = 0;
  const WordpieceVocab c = train_wordpiece(texts, opt);
  EXPECT_EQ(c.special().mask, 4);
  opt.vocab_size = 20;
  EXPECT_NE(error_of([&] { train_wordpiece(texts, opt); }).find("cannot hold the 5 special tokens"),
            std::string::npos);
  EXPECT_NE(error_of([&] { train_wordpiece({"  \n "}, opt); }).find("no words"), std::string::npos);
}

// Train on 3,000 fortunes, then every document's ids decode to its basic-tokenized
// (lower-cased, accent-stripped, punctuation-split) text: nothing became [UNK].
TEST(WordpieceTrainer, RoundTripOnTheDefaultCorpus) {
  const auto docs = fortunes(3000);
  if (docs.empty()) GTEST_SKIP() << "the fortunes package is not installed";
  std::vector<std::string_view> views(docs.begin(), docs.end());
  WordpieceTrainOptions opt;
  opt.vocab_size = 3000;
  WordpieceTrainSummary sum;
  const WordpieceTokenizer tok(train_wordpiece(views, opt, &sum));
  EXPECT_EQ(tok.vocab_size(), 3000);
  size_t tokens = 0, words = 0;
  for (const auto& d : docs) {
    const auto ids = tok.encode(d);
    const auto basic_words = tok.basic().tokenize(d);
    ASSERT_EQ(tok.decode(ids), joined(basic_words)) << d;
    tokens += ids.size();
    words += basic_words.size();
  }
  // Merges make most words one token (~1.33 pieces per word; characters alone would be ~4).
  EXPECT_LT(double(tokens) / double(words), 1.5) << describe(sum);
}

// mptrain's tokenizer against tests/ref/wordpiece_ref.py on 4,000 lines of the default
// corpus and on lines that exercise every rule (accents, CJK, controls, punctuation,
// invalid bytes, long words), with a vocabulary trained on the corpus.
TEST(WordpieceReference, MatchesIndependentPythonImplementation) {
  if (std::system("/usr/bin/python3 -c 'import unicodedata' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no /usr/bin/python3";
  const auto docs = fortunes(2500);
  if (docs.empty()) GTEST_SKIP() << "the fortunes package is not installed";
  TempDir dir;
  std::vector<std::string_view> views(docs.begin(), docs.end());
  WordpieceTrainOptions opt;
  opt.vocab_size = 2000;
  const WordpieceTokenizer tok(train_wordpiece(views, opt));
  data_test::write_bytes(dir / "vocab.txt", tok.vocab().to_text());

  std::vector<std::string> lines;
  for (const auto& d : docs) {
    std::istringstream in(d);
    std::string line;
    while (std::getline(in, line) && lines.size() < 4000) lines.push_back(line);
  }
  const char* tricky[] = {
      "Héllo WÖRLD, naïve café — «quoted» ¿qué?",
      "İSTANBUL ΣΟΦΟΣ Ὀδυσσεύς straße ﬁne",
      "你好，世界！ 日本語のテキスト 안녕하세요",
      "tab\there nbsp\u00A0here ideographic\u3000space zero\u200bwidth soft\u00ADhyphen",
      "bad \xff\xfe bytes \xc3 and NUL-free controls \x01\x1f\x7f",
      "$5.00 ^caret^ `tick` |pipe| ~tilde~ @home #tag 50% a&b",
      "emoji 🙂👍🏽 math ∑∫ arrows → ← symbols © ® ™ €",
      "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ ﬀ ligature",
      "supercalifragilisticexpialidocious-and-then-some-more-words-glued-together-into-a-very-long-string-"
      "beyond-100",
      "x\u0301\u0308y \u0301 combining-only",
      "line\u2028separator para\u2029separator",
  };
  for (const char* t : tricky) lines.emplace_back(t);
  lines.push_back(std::string(150, 'a') + " " + std::string(99, 'b'));
  std::string input;
  for (size_t i = 0; i < lines.size(); ++i) input += lines[i] + (i + 1 < lines.size() ? "\n" : "");
  data_test::write_bytes(dir / "input.txt", input);
  const auto r =
      data_test::run("/usr/bin/python3 " + data_test::source_dir() + "/tests/ref/wordpiece_ref.py " +
                     dir / "vocab.txt" + " " + dir / "input.txt " + dir / "ref.txt");
  ASSERT_EQ(r.status, 0) << r.err;
  // The words too: an [UNK] in the ids would hide a difference inside its word.
  const auto words =
      data_test::run("/usr/bin/python3 " + data_test::source_dir() + "/tests/ref/wordpiece_ref.py " +
                     dir / "vocab.txt" + " " + dir / "input.txt " + dir / "words.txt --basic");
  ASSERT_EQ(words.status, 0) << words.err;
  std::ifstream ref(dir / "ref.txt"), ref_words(dir / "words.txt");
  std::string expected, expected_words;
  size_t compared = 0, ids = 0;
  for (const auto& line : lines) {
    ASSERT_TRUE(std::getline(ref, expected));
    ASSERT_TRUE(std::getline(ref_words, expected_words));
    EXPECT_EQ(joined(tok.basic().tokenize(line)), expected_words) << "line: " << line;
    const auto got = tok.encode(line);
    std::string s;
    for (size_t i = 0; i < got.size(); ++i) s += (i ? " " : "") + std::to_string(got[i]);
    EXPECT_EQ(s, expected) << "line: " << line;
    ++compared;
    ids += got.size();
  }
  EXPECT_GT(compared, 4000u);
  EXPECT_GT(ids, 30000u);
}

}  // namespace
}  // namespace mptrain
