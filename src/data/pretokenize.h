// GPT-2's pre-tokeniser: the regular expression that cuts text into the pieces
// that byte-level BPE then merges one by one. It runs through PCRE2 (UTF + UCP + JIT)
// on any byte string: invalid UTF-8 is cut exactly where GPT-2 cuts the same text
// after decoding it with U+FFFD replacement (see split()), but the pieces keep the
// original bytes, so nothing is lost.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mptrain {

// GPT-2's pattern, 'pat' in OpenAI's encoder.py:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with \s spelled out as the Unicode White_Space set, which is what Python's
// `regex` module (GPT-2, Hugging Face) and Rust's regex (tiktoken) mean by \s.
// PCRE2's own \s under UCP also takes U+180E, so it is not used.
extern const char* const kGpt2SplitPattern;

// Offset of the first byte of `text` that is not part of valid UTF-8 (no overlongs,
// no surrogates, nothing above U+10FFFF), or std::string_view::npos.
size_t find_invalid_utf8(std::string_view text);

// `text` with every maximal invalid subsequence replaced by U+FFFD, the way the
// WHATWG decoder does (TextDecoder, node's Buffer#toString, Python's
// bytes.decode(errors="replace")): what GPT-2's encoders see when handed those bytes.
std::string replace_invalid_utf8(std::string_view text);

// Hugging Face's Digits pre-tokenizer, run before GPT-2's pattern (SmolLM's and StarCoder's
// tokenizer.json): numeric characters (Unicode N, as Rust's char::is_numeric) cut out as pieces
// of their own — each alone (individual_digits: true) or in runs (false) — and the pattern then
// runs on the text between them.
enum class DigitSplit { kNone, kIndividual, kRuns };

class Gpt2Pretokenizer {
 public:
  // Compiles and JIT-compiles the pattern; throws Error if PCRE2 refuses it.
  explicit Gpt2Pretokenizer(DigitSplit digits = DigitSplit::kNone);
  ~Gpt2Pretokenizer();
  Gpt2Pretokenizer(Gpt2Pretokenizer&& other) noexcept;
  Gpt2Pretokenizer& operator=(Gpt2Pretokenizer&& other) noexcept;
  Gpt2Pretokenizer(const Gpt2Pretokenizer&) = delete;
  Gpt2Pretokenizer& operator=(const Gpt2Pretokenizer&) = delete;

  // Appends the pieces of `text` to `pieces` (views into `text`; their
  // concatenation is `text`). Thread-safe: the compiled pattern is shared read-only.
  // Invalid UTF-8: the pattern runs on replace_invalid_utf8(text) and the cuts are
  // mapped back, so an invalid run behaves as one U+FFFD (a symbol: it joins the
  // ` ?[^\s\p{L}\p{N}]+` alternative) while its piece holds the original bytes.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  void split_gpt2(std::string_view text, std::vector<std::string_view>& pieces) const;
  void* code_ = nullptr;    // pcre2_code_8*, kept opaque so that users need no PCRE2 header
  void* digits_ = nullptr;  // the Digits step's pattern, or null
};

}  // namespace mptrain
