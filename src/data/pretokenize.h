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

// Hugging Face's Digits pre-tokenizer as a split pattern (SmolLM's and StarCoder's
// tokenizer.json): numeric characters (Unicode N, as Rust's char::is_numeric) cut out as pieces
// of their own, each alone (individual_digits: true) or in runs (false).
extern const char* const kDigitsPattern;
extern const char* const kDigitRunsPattern;

// A byte-level BPE pre-tokenizer: split patterns (PCRE2 syntax) applied in order, each to every
// piece the one before made. A pattern's matches and the text between them become pieces, empty
// ones dropped: Hugging Face's Split with behavior "Isolated", which is also what its Digits step
// and ByteLevel's own regex (GPT-2's pattern) do. GPT-2 is one step, its pattern, under which the
// text between matches is always empty; no step at all leaves the text one piece.
class Gpt2Pretokenizer {
 public:
  // Compiles and JIT-compiles the patterns; throws Error if PCRE2 refuses one.
  explicit Gpt2Pretokenizer(const std::vector<std::string>& patterns = {kGpt2SplitPattern});
  ~Gpt2Pretokenizer();
  Gpt2Pretokenizer(Gpt2Pretokenizer&& other) noexcept;
  Gpt2Pretokenizer& operator=(Gpt2Pretokenizer&& other) noexcept;
  Gpt2Pretokenizer(const Gpt2Pretokenizer&) = delete;
  Gpt2Pretokenizer& operator=(const Gpt2Pretokenizer&) = delete;

  // Appends the pieces of `text` to `pieces` (views into `text`; their
  // concatenation is `text`). Thread-safe: the compiled patterns are shared read-only.
  // Invalid UTF-8: each pattern runs on replace_invalid_utf8(text) and the cuts are
  // mapped back, so an invalid run behaves as one U+FFFD (under GPT-2's pattern a symbol:
  // it joins the ` ?[^\s\p{L}\p{N}]+` alternative) while its piece holds the original bytes.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  void split_step(const void* code, std::string_view text, std::vector<std::string_view>& pieces) const;
  void free_all();
  std::vector<void*> codes_;  // pcre2_code_8*, kept opaque so that users need no PCRE2 header
  // The step whose pattern is exactly kGpt2SplitPattern, if any: cut by hand over ASCII, with PCRE2
  // for a piece that a character past ASCII decides (pretokenize.cpp's run_gpt2_pattern).
  const void* gpt2_code_ = nullptr;
};

}  // namespace mptrain
