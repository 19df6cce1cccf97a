// WordPiece vocabulary training: word counts, then frequency-ranked pair merges with
// incremental pair counts and a lazy max-heap (see the header for the algorithm).
#include "data/wordpiece_trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <queue>
#include <unordered_map>

#include "core/error.h"

namespace mptrain {

namespace {

size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

uint64_t pair_key(int a, int b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

struct Word {
  std::vector<int> symbols;
  int64_t count = 0;
  int64_t stamp = -1;  // the last merge that rewrote this word (dedupes the pair index)
};

class Trainer {
 public:
  int symbol(const std::string& s) {
    auto [it, added] = ids_.emplace(s, static_cast<int>(strings_.size()));
    if (added) strings_.push_back(s);
    return it->second;
  }
  const std::string& str(int id) const { return strings_[static_cast<size_t>(id)]; }
  bool known(const std::string& s) const { return ids_.count(s) != 0; }

  std::vector<Word> words;
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int>> pair_words;

 private:
  std::vector<std::string> strings_;
  std::unordered_map<std::string, int> ids_;
};

struct Candidate {
  int64_t count;
  int a, b;
};


// Each word of the texts the basic tokenizer splits out, counted (a std::map: sorted); words
// longer than the tokenizer's limit are skipped and counted in `sum`.
std::map<std::string, int64_t> count_words(const std::vector<std::string_view>& texts, const BasicTokenizer& basic,
                                           const WordpieceTrainOptions& opt, WordpieceTrainSummary& sum) {
  std::unordered_map<std::string, int64_t> hashed;
  std::vector<std::string> buf;
  for (std::string_view text : texts) {
    buf.clear();
    basic.tokenize(text, buf);
    for (auto& w : buf) {
      size_t chars = 0;
      for (size_t i = 0; i < w.size(); i += utf8_length(static_cast<unsigned char>(w[i]))) ++chars;
      if (static_cast<int>(chars) > opt.basic.max_input_chars_per_word) {
        ++sum.skipped_long;
        continue;
      }
      ++hashed[w];
      ++sum.words;
    }
  }
  return {hashed.begin(), hashed.end()};
}

// Merge `stamp` (the pair a b into symbol s) in word wi, where the pair index listed it: its pair
// counts moved from the old pairs to the new ones, the new pairs indexed, every pair it touched
// appended to `touched`. A word already rewritten by this merge, or an index entry from before an
// earlier rewrite, is left alone.
void merge_in_word(Trainer& tr, int wi, int a, int b, int s, int64_t stamp, std::vector<uint64_t>& touched) {
  Word& w = tr.words[static_cast<size_t>(wi)];
  if (w.stamp == stamp) return;
  w.stamp = stamp;
  bool has = false;
  for (size_t k = 0; k + 1 < w.symbols.size() && !has; ++k) has = w.symbols[k] == a && w.symbols[k + 1] == b;
  if (!has) return;
  for (size_t k = 0; k + 1 < w.symbols.size(); ++k) {
    const uint64_t pk = pair_key(w.symbols[k], w.symbols[k + 1]);
    tr.pair_count[pk] -= w.count;
    touched.push_back(pk);
  }
  std::vector<int> out;
  out.reserve(w.symbols.size());
  for (size_t k = 0; k < w.symbols.size(); ++k) {
    if (k + 1 < w.symbols.size() && w.symbols[k] == a && w.symbols[k + 1] == b) {
      out.push_back(s);
      ++k;
    } else {
      out.push_back(w.symbols[k]);
    }
  }
  w.symbols = std::move(out);
  for (size_t k = 0; k + 1 < w.symbols.size(); ++k) {
    const uint64_t pk = pair_key(w.symbols[k], w.symbols[k + 1]);
    tr.pair_count[pk] += w.count;
    touched.push_back(pk);
    auto& list = tr.pair_words[pk];
    if (list.empty() || list.back() != wi) list.push_back(wi);
  }
}

}  // namespace

WordpieceVocab train_wordpiece(const std::vector<std::string_view>& texts, const WordpieceTrainOptions& opt,
                               WordpieceTrainSummary* summary_out) {
  const auto t0 = std::chrono::steady_clock::now();
  MPT_CHECK(opt.unused_tokens >= 0 && opt.unused_tokens <= 10000,
            "train-wordpiece: unused tokens must be in [0, 10000]");
  MPT_CHECK(opt.min_frequency >= 1, "train-wordpiece: --min-frequency must be at least 1");
  WordpieceTrainSummary sum;
  const BasicTokenizer basic(opt.basic);

  // 1. Word counts (sorted, so everything after is independent of hashing).
  const std::map<std::string, int64_t> counts = count_words(texts, basic, opt, sum);
  if (counts.empty()) throw Error("train-wordpiece: the input holds no words");
  sum.distinct_words = counts.size();

  // 2. Special tokens, alphabet, initial words.
  std::vector<std::string> vocab = {"[PAD]"};
  for (int i = 0; i < opt.unused_tokens; ++i) vocab.push_back("[unused" + std::to_string(i) + "]");
  for (const char* s : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) vocab.push_back(s);
  const size_t specials = vocab.size();

  Trainer tr;
  std::vector<std::string> chars;  // sorted: UTF-8 byte order is code point order
  {
    std::map<std::string, int> seen;
    for (const auto& [w, c] : counts)
      for (size_t i = 0; i < w.size(); i += utf8_length(static_cast<unsigned char>(w[i])))
        seen.emplace(w.substr(i, utf8_length(static_cast<unsigned char>(w[i]))), 0);
    for (const auto& [ch, unused] : seen) chars.push_back(ch);
  }
  for (const auto& ch : chars) vocab.push_back(ch);
  for (const auto& ch : chars) vocab.push_back("##" + ch);
  sum.alphabet = static_cast<int>(2 * chars.size());
  for (size_t i = specials; i < vocab.size(); ++i) tr.symbol(vocab[i]);
  if (static_cast<int>(vocab.size()) > opt.vocab_size)
    throw Error("train-wordpiece: a vocabulary of " + std::to_string(opt.vocab_size) + " cannot hold the " +
                std::to_string(specials) + " special tokens and the corpus' " + std::to_string(chars.size()) +
                " characters in both forms (" + std::to_string(vocab.size()) +
                " tokens); raise --vocab-size");

  for (const auto& [w, c] : counts) {
    Word word;
    word.count = c;
    for (size_t i = 0; i < w.size(); i += utf8_length(static_cast<unsigned char>(w[i])))
      word.symbols.push_back(
          tr.symbol((i ? "##" : "") + w.substr(i, utf8_length(static_cast<unsigned char>(w[i])))));
    tr.words.push_back(std::move(word));
  }
  for (size_t wi = 0; wi < tr.words.size(); ++wi) {
    const Word& w = tr.words[wi];
    for (size_t k = 0; k + 1 < w.symbols.size(); ++k) {
      const uint64_t key = pair_key(w.symbols[k], w.symbols[k + 1]);
      tr.pair_count[key] += w.count;
      auto& list = tr.pair_words[key];
      if (list.empty() || list.back() != static_cast<int>(wi)) list.push_back(static_cast<int>(wi));
    }
  }

  // 3. Merges, most frequent pair first; ties by the pair's strings.
  auto worse = [&](const Candidate& x, const Candidate& y) {
    if (x.count != y.count) return x.count < y.count;
    const int ca = tr.str(x.a).compare(tr.str(y.a));
    if (ca != 0) return ca > 0;
    return tr.str(x.b) > tr.str(y.b);
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> heap(worse);
  {
    std::vector<std::pair<uint64_t, int64_t>> all(tr.pair_count.begin(), tr.pair_count.end());
    for (const auto& [key, c] : all)
      heap.push({c, static_cast<int>(key >> 32), static_cast<int>(key & 0xFFFFFFFFu)});
  }
  std::vector<uint64_t> touched;
  while (static_cast<int>(vocab.size()) < opt.vocab_size && !heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    const uint64_t key = pair_key(top.a, top.b);
    const auto found = tr.pair_count.find(key);
    const int64_t now = found == tr.pair_count.end() ? 0 : found->second;
    if (now != top.count) {  // stale: counts only fall, so re-queue with the real count
      if (now > 0) heap.push({now, top.a, top.b});
      continue;
    }
    if (now < opt.min_frequency) {
      sum.stopped_at_min_frequency = true;
      break;
    }
    const std::string& b = tr.str(top.b);
    const std::string merged = tr.str(top.a) + (b.rfind("##", 0) == 0 ? b.substr(2) : b);
    const bool is_new = !tr.known(merged);
    const int s = tr.symbol(merged);
    if (is_new) vocab.push_back(merged);
    const int64_t stamp = sum.merges++;
    touched.clear();
    const std::vector<int> word_ids = std::move(tr.pair_words[key]);
    tr.pair_words.erase(key);
    for (int wi : word_ids) merge_in_word(tr, wi, top.a, top.b, s, stamp, touched);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t pk : touched) {
      auto it = tr.pair_count.find(pk);
      if (it == tr.pair_count.end()) continue;
      if (it->second <= 0) {
        tr.pair_count.erase(it);
        continue;
      }
      // Pairs whose count fell keep a stale (higher) entry that is fixed when popped;
      // pairs that are new or grew (those with s) need an entry with the new count.
      const int a = static_cast<int>(pk >> 32), bb = static_cast<int>(pk & 0xFFFFFFFFu);
      if (a == s || bb == s) heap.push({it->second, a, bb});
    }
  }
  sum.vocab_size = static_cast<int>(vocab.size());
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (summary_out) *summary_out = sum;
  return WordpieceVocab::from_tokens(std::move(vocab), "train-wordpiece");
}

std::string describe(const WordpieceTrainSummary& s) {
  char buf[512];
  std::snprintf(
      buf, sizeof(buf),
      "wordpiece vocabulary: %d tokens (%d alphabet, %d merges) from %llu words (%llu distinct) in %.2f s%s",
      s.vocab_size, s.alphabet, s.merges, static_cast<unsigned long long>(s.words),
      static_cast<unsigned long long>(s.distinct_words), s.seconds,
      s.stopped_at_min_frequency ? "; stopped early: no pair left that occurs --min-frequency times" : "");
  return buf;
}

}  // namespace mptrain
