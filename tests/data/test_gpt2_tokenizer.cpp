// GPT-2's tokenizer: the vocabulary, known ids (from OpenAI's encoder.py algorithm),
// the special token, lossless decode, the two BPE algorithms against each other and on
// a hand-made vocabulary where encoder.py's "merge every occurrence, then look again"
// matters, the merge cache, every way a vocabulary can be broken, the vocabulary search,
// and the equivalence test against the npm package's JavaScript encoder run by node on
// the default corpus and on generated text (see NpmEquivalence below for the contract).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/error.h"
#include "data/data_test_util.h"
#include "data/gpt2_tokenizer.h"
#include "data/prepare.h"
#include "data/shard.h"

namespace mptrain {
namespace {

using data_test::TempDir;

const Gpt2Tokenizer& gpt2(const std::string& dir) {
  static const Gpt2Tokenizer tok = Gpt2Tokenizer::load(dir);
  return tok;
}

TEST(Gpt2Tokenizer, LoadsTheVocabulary) {
  MPT_REQUIRE_VOCAB(dir);
  const auto& tok = gpt2(dir);
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.eot(), 50256);
  EXPECT_EQ(tok.num_merges(), 50000u);
  EXPECT_EQ(tok.token_bytes(50256), "<|endoftext|>");
  EXPECT_EQ(tok.token_bytes(198), "\n");
  EXPECT_EQ(tok.token_bytes(220), " ");
  EXPECT_EQ(tok.token_bytes(15496), "Hello");
  for (int b = 0; b < 256; ++b)
    EXPECT_EQ(tok.token_bytes(tok.byte_token(uint8_t(b))), std::string(1, char(b)));
}

TEST(Gpt2Tokenizer, KnownIds) {
  MPT_REQUIRE_VOCAB(dir);
  const auto& tok = gpt2(dir);
  // Expected ids: OpenAI's encoder.py algorithm with Python's `regex` module.
  struct Known {
    std::string text;
    std::vector<int> ids;
  };
  const std::vector<Known> known = {
      {"Hello world", {15496, 995}},
      {" Hello world!", {18435, 995, 0}},
      {"I'm here, you're there; we've they'll she'd it's can't",
       {40, 1101, 994, 11, 345, 821, 612, 26, 356, 1053, 484, 1183, 673, 1549, 340, 338, 460, 470}},
      {"HE'S SHOUTING", {13909, 6, 50, 6006, 12425, 2751}},
      {"tab\tand  two spaces  \n\n end  ", {8658, 197, 392, 220, 734, 9029, 220, 220, 628, 886, 220, 220}},
      {"12345 678", {10163, 2231, 718, 3695}},
      {"caf\xC3\xA9 na\xC3\xAFve \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80!",
       {66, 1878, 2634, 41492, 220, 40792, 23877, 229, 30325, 222, 0}},
      {"   leading", {220, 220, 3756}},
      {"trailing   ", {9535, 4386, 220, 220, 220}},
      {"a \xC2\xA0 b", {64, 5624, 275}},
      // Where GPT-2 (Unicode White_Space) and the npm package (JavaScript's \s) part:
      // the npm encoder gives [87, 220, 171, 119, 123, 88] and [64, 1587, 227, 0].
      {"x \xEF\xBB\xBFy", {87, 27332, 119, 123, 88}},
      {"a \xC2\x85!", {64, 220, 126, 227, 0}},
      {"", {}},
  };
  for (const auto& k : known) EXPECT_EQ(tok.encode(k.text), k.ids) << "'" << k.text << "'";
}

TEST(Gpt2Tokenizer, EndOfTextIsSpecialOnlyWhenAllowed) {
  MPT_REQUIRE_VOCAB(dir);
  const auto& tok = gpt2(dir);
  EXPECT_EQ(tok.encode("<|endoftext|>"), (std::vector<int>{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(tok.encode("<|endoftext|>", SpecialTokens::kAllowSpecial), std::vector<int>{50256});
  EXPECT_EQ(tok.encode("a<|endoftext|>b<|endoftext|>", SpecialTokens::kAllowSpecial),
            (std::vector<int>{64, 50256, 65, 50256}));
  std::vector<int> ids{15496, 50256, 995};
  EXPECT_EQ(tok.decode(ids), "Hello<|endoftext|> world");
}

TEST(Gpt2Tokenizer, DecodeIsLosslessAndChecksIds) {
  MPT_REQUIRE_VOCAB(dir);
  const auto& tok = gpt2(dir);
  std::mt19937 rng(7);
  for (int it = 0; it < 2000; ++it) {
    std::string s(rng() % 60, '\0');
    for (char& c : s) c = static_cast<char>(it % 2 ? rng() % 256 : " aZ'\n\xC3\xA9\xFF"[rng() % 9]);
    ASSERT_EQ(tok.decode(tok.encode(s)), s);
  }
  std::vector<int> bad{1, 50257};
  EXPECT_NE(data_test::error_of([&] { tok.decode(bad); }).find("outside the vocabulary"), std::string::npos);
  std::vector<int> negative{-1};
  EXPECT_NE(data_test::error_of([&] { tok.decode(negative); }).find("-1"), std::string::npos);
}

TEST(Gpt2Tokenizer, ScanAndHeapBpeAgree) {
  MPT_REQUIRE_VOCAB(dir);
  const auto& tok = gpt2(dir);
  std::mt19937 rng(11);
  const std::string alphabets[] = {"abcdefghijklmnopqrstuvwxyz",
                                   "etaoinshrdlu",
                                   " ",
                                   "0123456789",
                                   "=-_*#",
                                   "\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80",
                                   "ab"};
  for (int it = 0; it < 400; ++it) {
    const std::string& a = alphabets[it % 7];
    std::string piece(1 + rng() % 300, ' ');
    for (char& c : piece) c = a[rng() % a.size()];
    if (it % 3 == 0) piece[0] = ' ';
    std::vector<int> scan, heap;
    tok.bpe_scan(piece, scan);
    tok.bpe_heap(piece, heap);
    ASSERT_EQ(scan, heap) << "'" << piece << "'";
    ASSERT_EQ(tok.decode(scan), piece);
  }
}

TEST(Gpt2Tokenizer, SmallCacheGivesTheSameIds) {
  MPT_REQUIRE_VOCAB(dir);
  const auto& tok = gpt2(dir);
  std::string text;
  for (int i = 0; i < 3000; ++i) text += " word" + std::to_string(i % 500) + (i % 7 ? "," : ".\n");
  Gpt2Encoder big(tok), tiny(tok, 16);
  std::vector<int> a, b;
  big.encode(text, a);
  tiny.encode(text, b);
  big.encode(text, a);  // again, from a warm cache
  tiny.encode(text, b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(tok.decode(a), text + text);
}

// A hand-made vocabulary: the 256 byte tokens in GPT-2's byte-to-unicode alphabet,
// some merged tokens, then <|endoftext|>.
std::string byte_to_unicode(unsigned char b) {
  int n = 0;
  for (int x = 0; x < 256; ++x) {
    bool printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
    int cp = printable ? x : 256 + n++;
    if (x == b) {
      std::string s;
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      return s;
    }
  }
  return "";
}

void write_vocab(const std::string& dir, const std::vector<std::string>& extra, const std::string& merges) {
  nlohmann::json enc = nlohmann::json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) enc[byte_to_unicode(static_cast<unsigned char>(b))] = id++;
  for (const auto& t : extra) enc[t] = id++;
  enc["<|endoftext|>"] = id++;
  data_test::write_bytes(dir + "/encoder.json", enc.dump());
  data_test::write_bytes(dir + "/vocab.bpe", "#version: 0.2\n" + merges);
}

TEST(Gpt2Tokenizer, MergesEveryOccurrenceBeforeLookingAgain) {
  // "abc" is made by two merges, and (abc, ab) ranks between them. On "abcabc",
  // encoder.py merges (a,b) twice, then (ab,c) twice: [abc, abc]. A heap that took
  // new pairs at once would merge (abc, ab) after the first (ab,c): [abcab, c].
  TempDir tmp;
  write_vocab(tmp.path(), {"ab", "bc", "abc", "abcab"}, "a b\nb c\na bc\nabc ab\nab c\n");
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(tmp.path());
  EXPECT_EQ(tok.vocab_size(), 256 + 4 + 1);
  const int ab = 256, abc = 258;
  using Bpe = void (Gpt2Tokenizer::*)(std::string_view, std::vector<int>&) const;
  for (Bpe bpe : {&Gpt2Tokenizer::bpe_scan, &Gpt2Tokenizer::bpe_heap}) {
    std::vector<int> out;
    (tok.*bpe)("abcabc", out);
    EXPECT_EQ(out, (std::vector<int>{abc, abc}));
    out.clear();
    (tok.*bpe)("ababa", out);  // left to right: ab, ab, a
    EXPECT_EQ(out, (std::vector<int>{ab, ab, tok.byte_token('a')}));
  }
}

TEST(Gpt2Tokenizer, BrokenVocabulariesAreNamed) {
  TempDir tmp;
  auto load_error = [&](const std::string& enc, const std::string& merges) {
    std::filesystem::remove_all(tmp / "v");
    std::filesystem::create_directories(tmp / "v");
    if (!enc.empty()) data_test::write_bytes(tmp / "v/encoder.json", enc);
    if (!merges.empty()) data_test::write_bytes(tmp / "v/vocab.bpe", merges);
    return data_test::error_of([&] { Gpt2Tokenizer::load(tmp / "v"); });
  };
  EXPECT_NE(load_error("", "#version: 0.2\n").find("encoder.json' is missing"), std::string::npos);
  EXPECT_NE(load_error("{}", "").find("vocab.bpe' is missing"), std::string::npos);
  EXPECT_NE(load_error("{\"a\": 0,", "#version: 0.2\n").find("is not valid JSON"), std::string::npos);
  EXPECT_NE(load_error("[1, 2]", "#version: 0.2\n").find("expected a non-empty JSON object"),
            std::string::npos);
  EXPECT_NE(load_error("{\"a\": \"x\"}", "#version: 0.2\n").find("is not an integer"), std::string::npos);
  EXPECT_NE(load_error("{\"a\": 0, \"b\": 0}", "#version: 0.2\n").find("out of range or repeated"),
            std::string::npos);
  EXPECT_NE(load_error("{\"a\": 0}", "#version: 0.2\n").find("no end-of-text token <|endoftext|>"),
            std::string::npos);
  EXPECT_NE(
      load_error("{\"a\": 0, \"<|endoftext|>\": 1}", "#version: 0.2\n").find("no token for the single byte"),
      std::string::npos);
  EXPECT_NE(load_error("{\"a\\u0001\": 0, \"<|endoftext|>\": 1}", "#version: 0.2\n")
                .find("byte-to-unicode alphabet"),
            std::string::npos);

  // A good encoder.json with broken merges.
  write_vocab(tmp.path(), {"ab"}, "a b\n");
  std::ifstream in(tmp / "encoder.json");
  const std::string enc((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(load_error(enc, "#version: 0.2\na b c\n").find("line 2: expected two tokens, found 3"),
            std::string::npos);
  EXPECT_NE(
      load_error(enc, "#version: 0.2\nb c\n").find("line 2: 'b c' names a token that encoder.json lacks"),
      std::string::npos);
  EXPECT_NE(load_error(enc, "#version: 0.2\na b\na b\n").find("line 3: the merge 'a b' is repeated"),
            std::string::npos);
  EXPECT_NE(load_error(enc, "#version: 0.2\n").find("holds no merges"), std::string::npos);
  EXPECT_EQ(load_error(enc, "#version: 0.2\na b\n"), "(no Error thrown)");
}

TEST(Gpt2Tokenizer, FindVocabDir) {
  TempDir tmp;
  EXPECT_NE(data_test::error_of([&] { find_vocab_dir(tmp / "nowhere", nullptr); }).find("--vocab-dir"),
            std::string::npos);
  write_vocab(tmp.path(), {}, "");
  EXPECT_EQ(find_vocab_dir(tmp.path(), nullptr), tmp.path());
  const char* old = std::getenv("MPTRAIN_VOCAB_DIR");
  const std::string saved = old ? old : "";
  ::setenv("MPTRAIN_VOCAB_DIR", (tmp / "nowhere").c_str(), 1);
  EXPECT_NE(data_test::error_of([&] { find_vocab_dir("", nullptr); }).find("MPTRAIN_VOCAB_DIR"),
            std::string::npos);
  ::setenv("MPTRAIN_VOCAB_DIR", tmp.path().c_str(), 1);
  EXPECT_EQ(find_vocab_dir("", nullptr), tmp.path());
  if (old)
    ::setenv("MPTRAIN_VOCAB_DIR", saved.c_str(), 1);
  else
    ::unsetenv("MPTRAIN_VOCAB_DIR");
}

// ---------------------------------------------------------------------------
// Equivalence with the npm package's JavaScript encoder.
//
// Contract. Both sides get the same bytes. node decodes them the WHATWG way (each
// maximal invalid UTF-8 subsequence becomes U+FFFD, as any JS caller gets from a
// Buffer); mptrain keeps the bytes. Then:
//  - the pattern cuts both into the same number of pieces, and each mptrain piece with
//    its invalid subsequences replaced by U+FFFD is byte for byte node's piece;
//  - every piece that is valid UTF-8 gets exactly node's ids (node's pieces are encoded
//    with the package's encode(), and for documents up to 64 KB encode(document) is
//    checked to give the same ids, see encode_npm.js);
//  - a piece holding invalid bytes is merged from its own bytes, so its ids differ
//    from node's ids for U+FFFD: counted and reported, and decode gives the bytes back;
//  - decode(encode(document)) == document for every document.
// The generated text leaves out the two code points where GPT-2 and the npm package
// disagree (U+0085, U+FEFF: KnownIds pins GPT-2's ids for them) and code points newer
// than Unicode 14 (PCRE2 10.42's tables); docs/DATA.md lists both.

struct NpmStats {
  size_t documents = 0, bytes = 0, pieces = 0, tokens_compared = 0, invalid_pieces = 0;
};

void check_against_npm(const Gpt2Tokenizer& tok, const std::string& pkg, const std::vector<std::string>& docs,
                       NpmStats& st) {
  TempDir tmp;
  std::string blob;
  for (const auto& d : docs) {
    uint32_t n = static_cast<uint32_t>(d.size());
    blob.append(reinterpret_cast<const char*>(&n), 4);
    blob += d;
  }
  data_test::write_bytes(tmp / "docs.bin", blob);
  const std::string script = data_test::source_dir() + "/tests/data/encode_npm.js";
  auto r = data_test::run("node " + data_test::shell_quote(script) + " " + data_test::shell_quote(pkg) + " " +
                          data_test::shell_quote(tmp / "docs.bin"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  Gpt2Encoder enc(tok);
  for (size_t d = 0; d < docs.size(); ++d) {
    ASSERT_TRUE(std::getline(lines, line)) << "node printed " << d << " of " << docs.size() << " documents";
    const auto js = nlohmann::json::parse(line);
    const std::string& doc = docs[d];
    const auto pieces = tok.pretokenizer().split(doc);
    ASSERT_EQ(pieces.size(), js["lens"].size()) << "document " << d << ": '" << doc << "'";
    std::vector<int> concat;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const std::string_view p = pieces[i];
      ASSERT_EQ(replace_invalid_utf8(p).size(), js["lens"][i].get<size_t>())
          << "document " << d << ", piece " << i << ": '" << p << "'";
      std::vector<int> ids;
      tok.bpe(p, ids);
      if (find_invalid_utf8(p) == std::string_view::npos) {
        ASSERT_EQ(ids, js["ids"][i].get<std::vector<int>>())
            << "document " << d << ", piece " << i << ": '" << p << "'";
        st.tokens_compared += ids.size();
      } else {
        ++st.invalid_pieces;
        ASSERT_EQ(tok.decode(ids), p);
      }
      concat.insert(concat.end(), ids.begin(), ids.end());
    }
    std::vector<int> whole;
    enc.encode(doc, whole);
    ASSERT_EQ(whole, concat) << "document " << d;
    ASSERT_EQ(tok.decode(whole), doc) << "document " << d;
    st.documents++;
    st.bytes += doc.size();
    st.pieces += pieces.size();
  }
}

// Varied text, deterministic: words, contractions, numbers, every kind of whitespace,
// accented and non-Latin scripts, emoji, symbols, code, long runs (the heap BPE path)
// and, in every third document, invalid UTF-8.
std::vector<std::string> generated_documents(size_t count) {
  // clang-format off
  const std::vector<std::string> words = {
      "the", "of", "and", "to", "in", "is", "was", "that", "for", "it", "with", "as", "his", "on", "be", "at",
      "by", "I", "this", "had", "not", "are", "but", "from", "or", "have", "an", "they", "which", "one", "you",
      "were", "her", "all", "she", "there", "would", "their", "we", "him", "been", "has", "when", "who", "will",
      "Tokenizer", "GPT", "BPE", "encoder", "OpenAI", "transformers", "antidisestablishmentarianism", "x", "Qz",
      "McDonald", "iPhone", "JSON", "HTTP", "e-mail", "co-operate"};
  const std::vector<std::string> contractions = {
      "don't", "I'm", "you're", "we've", "they'll", "she'd", "it's", "IT'S", "'tis", "rock 'n' roll", "O'Neil",
      "''", "'''s", "y'all'd've", "ma'am", "'s'", "\xE2\x80\x99s curly", "can\xE2\x80\x99t"};
  const std::vector<std::string> spaces = {
      " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n", "  \n  ", " \t \n", "\xC2\xA0", "\xE2\x80\xA8",
      "\xE3\x80\x80", "\xE2\x80\x83", "\x0B", "\x0C", "        "};
  const std::vector<std::string> unicode = {
      "caf\xC3\xA9", "na\xC3\xAFve", "\xC3\x86r\xC3\xB8sk\xC3\xB8" "bing", "Z\xC3\xBCrich", "fa\xC3\xA7" "ade",
      "jalape\xC3\xB1o", "\xC3\x85ngstr\xC3\xB6m", "\xC5\x81\xC3\xB3" "d\xC5\xBA", "\xC4\xB0stanbul",
      "stra\xC3\x9F" "e", "\xCE\x9A\xCE\xB1\xCE\xBB\xCE\xB7\xCE\xBC\xCE\xAD\xCF\x81\xCE\xB1",
      "\xD0\xA1\xD1\x8A\xD0\xB5\xD1\x88\xD1\x8C \xD0\xB6\xD0\xB5 \xD0\xB5\xD1\x89\xD1\x91",
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD8\xA8\xD8\xA7\xD9\x84\xD8\xB9\xD8\xA7\xD9\x84\xD9\x85",
      "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D", "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82",
      "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF\xE3\x82\xAB\xE3\x82\xBF",
      "\xEC\x95\x88\xEB\x85\x95\xED\x95\x98\xEC\x84\xB8\xEC\x9A\x94",
      "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5",
      "\xE1\x83\x92\xE1\x83\x90\xE1\x83\x9B\xE1\x83\x90\xE1\x83\xA0\xE1\x83\xAF\xE1\x83\x9D\xE1\x83\x91\xE1\x83\x90",
      "\xD5\x80\xD5\xA1\xD5\xB5\xD5\xA5\xD6\x80\xD5\xA5\xD5\xB6", "\xE1\x88\xB0\xE1\x88\x8B\xE1\x88\x9D",
      "\xE0\xAE\xB5\xE0\xAE\xA3\xE0\xAE\x95\xE0\xAF\x8D\xE0\xAE\x95\xE0\xAE\xAE\xE0\xAF\x8D", "e\xCC\x81",
      "\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93", "\xD9\xA3\xD9\xA4", "x\xC2\xB2", "\xE2\x85\xAB", "\xC2\xBD"};
  const std::vector<std::string> symbols = {
      "\xF0\x9F\x91\x8D", "\xF0\x9F\x98\x80\xF0\x9F\x98\x83",
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7", "\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7",
      "\xE2\x9D\xA4\xEF\xB8\x8F", "1\xEF\xB8\x8F\xE2\x83\xA3", "\xE2\x86\x92", "\xE2\x88\x91\xE2\x88\x9E",
      "\xC2\xA9\xC2\xAE\xE2\x84\xA2", "\xE2\x82\xAC\xC2\xA3\xC2\xA5", "\xE2\x80\xA6", "\xE2\x80\x94",
      "\xE2\x80\x9Cquoted\xE2\x80\x9D", "\xC2\xABguillemets\xC2\xBB", ".", ",", "!", "?", ";", ":", "(", ")",
      "\"", "--", "...", "!?", "#", "@user", "C++", "{\"a\": [1, 2], \"b\": \"c\"}",
      "for (int i = 0; i < n; ++i) { x[i] += 2; }", "https://example.org/a?b=c&d=e", "\x01\x02\x1B[31m", "\x7F",
      std::string(1, '\0'), "\xE2\x80\x8B", "\xE2\x80\x8D"};
  const std::vector<std::string> invalid = {
      "\xFF", "\xFE\xFF", "\xC3", "\xE2\x82", "\xED\xA0\x80", "\xC0\xAF", "\xF4\x90\x80\x80", "caf\xE9", "\x80\x80",
      "it\xFF's", " \xFF ", "\xF0\x9F\x98", "a\xC3" "b", "\xE9t\xE9"};
  // clang-format on
  std::mt19937 rng(2024);
  auto pick = [&](const std::vector<std::string>& v) -> const std::string& { return v[rng() % v.size()]; };
  std::vector<std::string> docs;
  for (size_t d = 0; d < count; ++d) {
    std::string doc;
    const size_t target = 300 + rng() % 1500;
    while (doc.size() < target) {
      switch (rng() % 14) {
        case 0:
        case 1:
        case 2:
        case 3: {
          std::string w = pick(words);
          if (rng() % 5 == 0) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
          if (rng() % 17 == 0)
            for (char& c : w) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
          doc += w;
          break;
        }
        case 4:
          doc += pick(contractions);
          break;
        case 5: {
          static const char* const fmt[] = {"%u",        "%u.%u", "%u,%03u,%03u", "2024-%02u-%02u",
                                            "v%u.%u.%u", "0x%X"};
          char buf[64];
          std::snprintf(buf, sizeof(buf), fmt[rng() % 6], unsigned(rng() % 100000), unsigned(rng() % 1000),
                        unsigned(rng() % 1000));
          doc += buf;
          break;
        }
        case 6:
        case 7:
        case 8:
          doc += pick(spaces);
          break;
        case 9:
          doc += pick(unicode);
          break;
        case 10:
        case 11:
          doc += pick(symbols);
          break;
        case 12:
          if (d % 3 == 2) doc += pick(invalid);
          break;
        case 13:
          if (rng() % 8 == 0) {  // a long run: BPE's heap path
            static const std::string runs[] = {"=", "-", " ", "7", "ab", "\xE2\x80\x94", "xyzzy"};
            const std::string& r = runs[rng() % 7];
            std::string s;
            for (size_t k = 70 + rng() % 150; s.size() < k;) s += r;
            doc += s;
          } else if (rng() % 2) {
            std::string s;
            for (size_t k = 40 + rng() % 200; k > 0; --k) s.push_back(static_cast<char>('a' + rng() % 26));
            doc += " " + s;
          }
          break;
      }
      if (rng() % 3) doc += " ";
    }
    docs.push_back(doc);
  }
  return docs;
}

bool have_npm_oracle(const std::string& dir, std::string& why) {
  if (!data_test::have_node()) {
    why = "node is not installed (the test script installs it)";
    return false;
  }
  if (!std::filesystem::exists(dir + "/Encoder.js")) {
    why = "no gpt-3-encoder package (Encoder.js) in " + dir;
    return false;
  }
  return true;
}

// The documents of the default corpus (Debian's fortunes, a fortune a document), in file order.
std::vector<std::string> fortune_documents(const std::string& corpus) {
  std::vector<std::string> docs;
  for (const auto& f : expand_inputs({corpus}, {"*.dat"})) {
    const std::string text = read_text_file(f.path);
    for (auto d : split_documents(text, "%")) docs.emplace_back(d);
  }
  return docs;
}

TEST(NpmEquivalence, GeneratedText) {
  MPT_REQUIRE_VOCAB(dir);
  std::string why;
  if (!have_npm_oracle(dir, why)) GTEST_SKIP() << why;
  auto docs = generated_documents(700);
  // Whole-text extremes too: a document of nothing but spaces, one of one long word.
  docs.push_back(std::string(5000, ' '));
  docs.push_back("x" + std::string(3000, ' ') + "y\n");
  NpmStats st;
  check_against_npm(gpt2(dir), dir, docs, st);
  std::printf(
      "[ generated ] %zu documents, %zu bytes, %zu pieces, %zu ids identical, %zu pieces with invalid "
      "UTF-8 (lossless, ids not comparable)\n",
      st.documents, st.bytes, st.pieces, st.tokens_compared, st.invalid_pieces);
  EXPECT_GT(st.bytes, 500000u);
  EXPECT_GT(st.invalid_pieces, 100u);
}

TEST(NpmEquivalence, DefaultCorpus) {
  MPT_REQUIRE_VOCAB(dir);
  std::string why;
  if (!have_npm_oracle(dir, why)) GTEST_SKIP() << why;
  const std::string corpus = "/usr/share/games/fortunes";
  if (!std::filesystem::exists(corpus))
    GTEST_SKIP() << "the default corpus (Debian package fortunes) is not installed";
  const std::vector<std::string> docs = fortune_documents(corpus);
  NpmStats st;
  check_against_npm(gpt2(dir), dir, docs, st);
  std::printf("[ fortunes ] %zu documents, %zu bytes, %zu pieces, %zu ids identical\n", st.documents,
              st.bytes, st.pieces, st.tokens_compared);
  EXPECT_GT(st.bytes, 1000000u);
}

// prepare on JSON lines (gzipped, a nested text field, texts escaped as \uXXXX or raw UTF-8) writes
// the stream a JavaScript user of the npm package gets from the same file with node's own gunzip and
// JSON.parse: <|endoftext|> and encode(text) for every record (tests/data/encode_jsonl_npm.js).
TEST(NpmEquivalence, JsonLines) {
  MPT_REQUIRE_VOCAB(dir);
  std::string why;
  if (!have_npm_oracle(dir, why)) GTEST_SKIP() << why;
  const std::string corpus = "/usr/share/games/fortunes";
  if (!std::filesystem::exists(corpus))
    GTEST_SKIP() << "the default corpus (Debian package fortunes) is not installed";
  TempDir tmp;
  std::string jsonl;
  const std::vector<std::string> docs = fortune_documents(corpus);
  const size_t records = std::min<size_t>(docs.size(), 4000);
  for (size_t i = 0; i < records; ++i) {
    const nlohmann::json record = {{"id", i}, {"doc", {{"n", i % 7}, {"text", docs[i]}}}};
    jsonl += record.dump(-1, ' ', i % 2 == 0, nlohmann::json::error_handler_t::replace) + "\n";
  }
  data_test::write_bytes(tmp / "r.jsonl", jsonl);
  ASSERT_EQ(data_test::run("gzip " + tmp / "r.jsonl").status, 0);
  const std::string script = data_test::source_dir() + "/tests/data/encode_jsonl_npm.js";
  const auto node = data_test::run("node " + data_test::shell_quote(script) + " " + data_test::shell_quote(dir) +
                                   " " + tmp / "r.jsonl.gz doc.text");
  ASSERT_EQ(node.status, 0) << node.err;
  const std::vector<int> want = nlohmann::json::parse(node.out).get<std::vector<int>>();
  const auto prep = data_test::run(data_test::shell_quote(data_test::mptrain_binary()) + " prepare " +
                                   tmp / "r.jsonl.gz --text-field doc.text --val-fraction 0 --shard-size 1G -q -o " +
                                   tmp / "out --name r --vocab-dir " + dir);
  ASSERT_EQ(prep.status, 0) << prep.err;
  std::vector<int> got;
  Shard(tmp / "out/r_train_000000.bin").visit([&](auto ids) { got.insert(got.end(), ids.begin(), ids.end()); });
  EXPECT_EQ(std::count(want.begin(), want.end(), 50256), static_cast<long>(records));
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want);
  std::printf("[ json lines ] %zu records, %zu tokens identical\n", records, want.size());
}

}  // namespace
}  // namespace mptrain
