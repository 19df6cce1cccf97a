// WordPiece vocabulary (vocab.txt) and the greedy longest-match-first tokenizer.
#include "data/wordpiece.h"

#include <algorithm>

#include "core/error.h"
#include "io/fileutil.h"

namespace mptrain {

namespace {

constexpr const char* kSpecialNames[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

bool bracketed(const std::string& t) { return t.size() > 2 && t.front() == '[' && t.back() == ']'; }

size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace

WordpieceVocab WordpieceVocab::from_tokens(std::vector<std::string> tokens, const std::string& source) {
  if (tokens.empty()) throw Error("vocabulary '" + source + "' is empty");
  MPT_CHECK(tokens.size() < (1u << 31), "vocabulary '" + source + "' has too many tokens");
  WordpieceVocab v;
  v.tokens_ = std::move(tokens);
  v.ids_.reserve(v.tokens_.size() * 2);
  v.special_flags_.assign(v.tokens_.size(), 0);
  for (size_t i = 0; i < v.tokens_.size(); ++i) {
    const std::string& t = v.tokens_[i];
    if (t.empty()) throw Error("vocabulary '" + source + "' line " + std::to_string(i + 1) + " is empty");
    if (!v.ids_.emplace(t, static_cast<int>(i)).second)
      throw Error("vocabulary '" + source + "' line " + std::to_string(i + 1) + ": token '" + t +
                  "' already appears on line " + std::to_string(v.ids_.at(t) + 1));
    v.special_flags_[i] = bracketed(t);
  }
  std::string missing;
  int* slots[] = {&v.special_.pad, &v.special_.unk, &v.special_.cls, &v.special_.sep, &v.special_.mask};
  for (size_t k = 0; k < 5; ++k) {
    *slots[k] = v.find(kSpecialNames[k]);
    if (*slots[k] < 0) missing += std::string(missing.empty() ? "" : " ") + kSpecialNames[k];
  }
  if (!missing.empty())
    throw Error("vocabulary '" + source + "' lacks the special token(s) " + missing +
                "; a BERT vocab.txt needs [PAD] [UNK] [CLS] [SEP] [MASK] (mptrain tokenizer train-wordpiece "
                "writes them)");
  return v;
}

WordpieceVocab WordpieceVocab::parse(std::string_view text, const std::string& source) {
  std::vector<std::string> tokens;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    tokens.emplace_back(line);
    start = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  return from_tokens(std::move(tokens), source);
}

WordpieceVocab WordpieceVocab::load(const std::string& path) { return parse(read_file(path), path); }

const std::string& WordpieceVocab::token(int id) const {
  if (id < 0 || id >= size())
    throw Error("token id " + std::to_string(id) + " is out of range for a vocabulary of " +
                std::to_string(size()));
  return tokens_[static_cast<size_t>(id)];
}

int WordpieceVocab::find(std::string_view token) const {
  auto it = ids_.find(std::string(token));
  return it == ids_.end() ? -1 : it->second;
}

std::string WordpieceVocab::to_text() const {
  std::string out;
  for (const auto& t : tokens_) out += t + "\n";
  return out;
}

uint64_t WordpieceVocab::fingerprint() const {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& t : tokens_) {
    for (unsigned char c : t) h = (h ^ c) * 0x100000001b3ull;
    h = (h ^ '\n') * 0x100000001b3ull;
  }
  return h;
}

WordpieceTokenizer::WordpieceTokenizer(WordpieceVocab vocab, BasicTokenizerOptions basic)
    : vocab_(std::move(vocab)), basic_(basic) {
  for (int i = 0; i < vocab_.size(); ++i)
    max_token_bytes_ = std::max(max_token_bytes_, vocab_.token(i).size());
}

WordpieceTokenizer WordpieceTokenizer::load(const std::string& vocab_path, BasicTokenizerOptions basic) {
  return WordpieceTokenizer(WordpieceVocab::load(vocab_path), basic);
}

void WordpieceTokenizer::encode_word(std::string_view word, std::vector<int>& out) const {
  // Code point boundaries (the greedy search may only cut there).
  std::vector<size_t> cuts;
  for (size_t i = 0; i < word.size(); i += utf8_length(static_cast<unsigned char>(word[i])))
    cuts.push_back(i);
  cuts.push_back(word.size());
  const size_t chars = cuts.size() - 1;
  if (chars == 0) return;
  if (static_cast<int>(chars) > basic_.options().max_input_chars_per_word) {
    out.push_back(vocab_.special().unk);
    return;
  }
  const size_t before = out.size();
  std::string piece;
  size_t start = 0;
  while (start < chars) {
    int found = -1;
    size_t end = chars;
    for (; end > start; --end) {
      const size_t bytes = cuts[end] - cuts[start];
      if (bytes + (start > 0 ? 2 : 0) > max_token_bytes_) continue;
      piece.assign(start > 0 ? "##" : "");
      piece.append(word.substr(cuts[start], bytes));
      found = vocab_.find(piece);
      if (found >= 0) break;
    }
    if (found < 0) {  // no cover: the whole word is unknown
      out.resize(before);
      out.push_back(vocab_.special().unk);
      return;
    }
    out.push_back(found);
    start = end;
  }
}

void WordpieceTokenizer::encode(std::string_view text, std::vector<int>& out, BertSpecialText special) const {
  std::vector<std::string> words;
  auto plain = [&](std::string_view part) {
    words.clear();
    basic_.tokenize(part, words);
    for (const auto& w : words) encode_word(w, out);
  };
  if (special == BertSpecialText::kAsText) {
    plain(text);
    return;
  }
  const BertSpecialIds& s = vocab_.special();
  const std::pair<const char*, int> names[] = {
      {"[PAD]", s.pad}, {"[UNK]", s.unk}, {"[CLS]", s.cls}, {"[SEP]", s.sep}, {"[MASK]", s.mask}};
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string_view::npos;
    int best_id = -1;
    size_t best_len = 0;
    for (const auto& [name, id] : names) {
      size_t at = text.find(name, pos);
      if (at < best) {
        best = at;
        best_id = id;
        best_len = std::string_view(name).size();
      }
    }
    if (best == std::string_view::npos) break;
    plain(text.substr(pos, best - pos));
    out.push_back(best_id);
    pos = best + best_len;
  }
  plain(text.substr(std::min(pos, text.size())));
}

std::vector<int> WordpieceTokenizer::encode(std::string_view text, BertSpecialText special) const {
  std::vector<int> out;
  encode(text, out, special);
  return out;
}

std::vector<std::string> WordpieceTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> out;
  for (int id : encode(text)) out.push_back(vocab_.token(id));
  return out;
}

std::string WordpieceTokenizer::decode(std::span<const int> ids, bool skip_special) const {
  std::string out;
  for (int id : ids) {
    const std::string& t = vocab_.token(id);
    if (skip_special && vocab_.is_special(id) && id != vocab_.special().unk) continue;
    if (!out.empty() && t.size() > 2 && t[0] == '#' && t[1] == '#') {  // HF: replace(" ##", "")
      out.append(t, 2, std::string::npos);
    } else {
      if (!out.empty()) out.push_back(' ');
      out += t;
    }
  }
  return out;
}

}  // namespace mptrain
