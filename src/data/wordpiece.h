// BERT's WordPiece tokenizer: a vocabulary read from a standard `vocab.txt` (one token
// per line, id = line number), BERT's basic tokenisation (data/wordpiece_basic.h) and
// greedy longest-match-first WordPiece with "##" continuations, as in
// google-research/bert tokenization.py (FullTokenizer) and Hugging Face's BertTokenizer.
//
//   WordpieceTokenizer tok = WordpieceTokenizer::load("vocab.txt");   // uncased by default
//   std::vector<int> ids = tok.encode("Héllo, world!");   // hello , world !
//   std::string text = tok.decode(ids);                     // "hello , world !"
//
// The vocabulary must hold [PAD], [UNK], [CLS], [SEP] and [MASK] (anywhere; bert-base-uncased
// has them at 0, 100, 101, 102, 103, the layout `mptrain tokenizer train-wordpiece` writes).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/wordpiece_basic.h"

namespace mptrain {

// The five special tokens every BERT vocabulary holds.
struct BertSpecialIds {
  int pad = -1, unk = -1, cls = -1, sep = -1, mask = -1;
};

class WordpieceVocab {
 public:
  // Parses vocab.txt text: one token per line ("\n" or "\r\n"), id = 0-based line number.
  // `source` names the file in errors. Throws Error for an empty vocabulary, an empty
  // line, a duplicate token, more than 2^31 tokens, or a missing special token.
  static WordpieceVocab parse(std::string_view text, const std::string& source);
  static WordpieceVocab load(const std::string& path);
  // From a list of tokens (id = index); same checks as parse.
  static WordpieceVocab from_tokens(std::vector<std::string> tokens, const std::string& source);

  int size() const { return static_cast<int>(tokens_.size()); }
  const std::string& token(int id) const;  // throws Error for an id out of range
  int find(std::string_view token) const;  // -1 when absent
  const BertSpecialIds& special() const { return special_; }
  // True for tokens written "[...]" (the five special tokens, [unusedN], ...): never
  // produced from text by the tokenizer, never masked, never a random replacement.
  bool is_special(int id) const { return special_flags_[static_cast<size_t>(id)] != 0; }
  // The vocabulary as vocab.txt text (each token and "\n").
  std::string to_text() const;
  // FNV-1a 64 of to_text(): identifies a vocabulary in instance files.
  uint64_t fingerprint() const;

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int> ids_;
  std::vector<uint8_t> special_flags_;
  BertSpecialIds special_;
};

enum class BertSpecialText {
  kAsText,     // "[MASK]" in text is tokenised like any text: "[", "mask", "]"
  kRecognize,  // the literal special tokens ([PAD] [UNK] [CLS] [SEP] [MASK]) in text become
               // their ids (Hugging Face's behaviour; what fill-mask needs)
};

class WordpieceTokenizer {
 public:
  WordpieceTokenizer(WordpieceVocab vocab, BasicTokenizerOptions basic = {});
  static WordpieceTokenizer load(const std::string& vocab_path, BasicTokenizerOptions basic = {});

  const WordpieceVocab& vocab() const { return vocab_; }
  const BasicTokenizer& basic() const { return basic_; }
  int vocab_size() const { return vocab_.size(); }
  const BertSpecialIds& special() const { return vocab_.special(); }

  // Basic tokenisation, then WordPiece on each word; ids appended to `out`.
  void encode(std::string_view text, std::vector<int>& out,
              BertSpecialText special = BertSpecialText::kAsText) const;
  std::vector<int> encode(std::string_view text, BertSpecialText special = BertSpecialText::kAsText) const;
  // WordPiece of one basic token (already cleaned, lower-cased, split): greedy longest
  // match first; a word longer than max_input_chars_per_word code points, or one
  // without a full cover, is a single [UNK].
  void encode_word(std::string_view word, std::vector<int>& out) const;
  // The token strings of encode (for inspection and tests).
  std::vector<std::string> tokenize(std::string_view text) const;

  // Tokens joined by spaces, "##" pieces glued to the token before (Hugging Face's
  // convert_tokens_to_string). skip_special drops [PAD]/[CLS]/[SEP]/[MASK]/[unusedN]
  // ([UNK] is kept: it stands for text). Throws Error for an id out of range.
  std::string decode(std::span<const int> ids, bool skip_special = false) const;

 private:
  WordpieceVocab vocab_;
  BasicTokenizer basic_;
  // Longest token length in bytes, to bound the greedy search.
  size_t max_token_bytes_ = 0;
};

}  // namespace mptrain
