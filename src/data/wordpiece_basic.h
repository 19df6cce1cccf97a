// BERT's BasicTokenizer (google-research/bert tokenization.py), the step before
// WordPiece: UTF-8 text -> words.
//   1. clean: invalid UTF-8 bytes, U+0000, U+FFFD and control characters (categories Cc
//      and Cf, except \t \n \r) are dropped; whitespace (\t \n \r, space, category Zs)
//      becomes a space;
//   2. every CJK ideograph (the blocks tokenization.py lists) becomes a word of its own;
//   3. split on whitespace (space, U+2028, U+2029: what Python's str.split() still
//      splits on after step 1);
//   4. uncased: each word is lower-cased (Unicode full case mapping, as Python's
//      str.lower()), then accents are stripped (NFD, then every Mn character dropped);
//   5. every punctuation character becomes a word of its own: ASCII 33-47, 58-64,
//      91-96, 123-126 (so $ + < = > ^ ` | ~ count too) and Unicode categories P*.
// Unicode data (categories, case mapping, NFD) comes from ICU (Debian's libicu-dev)
// rather than hand-written tables: ICU 72 follows Unicode 15, is the library the
// system already uses for exactly these properties, and keeps the tables correct
// for every script without thousands of lines of generated data here. ASCII takes a
// fast path that needs no ICU call (the same results, checked by a test).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mptrain {

struct BasicTokenizerOptions {
  bool lower_case = true;              // uncased vocabulary (bert-base-uncased); false: cased
  int strip_accents = -1;              // -1: follow lower_case (BERT's rule); 0: never; 1: always
  bool split_cjk = true;               // tokenize_chinese_chars
  int max_input_chars_per_word = 100;  // WordPiece: longer words (code points) become [UNK]
};

class BasicTokenizer {
 public:
  explicit BasicTokenizer(BasicTokenizerOptions opt = {});
  const BasicTokenizerOptions& options() const { return opt_; }

  // Words of `text`, appended to `out` (UTF-8).
  void tokenize(std::string_view text, std::vector<std::string>& out) const;
  std::vector<std::string> tokenize(std::string_view text) const;

 private:
  void finish_word(std::u32string& word, std::vector<std::string>& out) const;
  BasicTokenizerOptions opt_;
  bool strip_accents_;
};

// Unicode helpers the tokenizer is built from (exposed for tests).
bool bert_is_whitespace(char32_t c);
bool bert_is_control(char32_t c);
bool bert_is_punctuation(char32_t c);
bool bert_is_cjk(char32_t c);
// Appends the UTF-8 bytes of c.
void append_utf8(std::string& out, char32_t c);
// Decodes UTF-8; invalid bytes are dropped (tokenization.py's decode("utf-8", "ignore")).
std::u32string decode_utf8_dropping_invalid(std::string_view text);

}  // namespace mptrain
