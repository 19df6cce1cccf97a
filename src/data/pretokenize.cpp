// GPT-2's pre-tokenisation pattern through PCRE2 (UTF + UCP + JIT), plus the
// UTF-8 validation and WHATWG-style U+FFFD replacement that let it run on any bytes.
//
// Why not PCRE2_MATCH_INVALID_UTF: with it, invalid bytes match nothing and fall
// between matches, so "!\xff?" would become three pieces where GPT-2 (which sees
// "!\uFFFD?") makes one. Matching on the replaced text and mapping the cuts back
// gives GPT-2's cuts and keeps the original bytes.
#include "data/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstring>
#include <utility>

#include "core/error.h"

namespace mptrain {

// \s is written out as Unicode's White_Space property (U+0009..U+000D, U+0020, U+0085,
// U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000).
// (?!\S) becomes (?![^WS]): "not followed by a non-space", true at the end of text.
#define MPT_WS                                                                                               \
  "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{" \
  "3000}"
const char* const kGpt2SplitPattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" MPT_WS
                                      "\\p{L}\\p{N}]+|[" MPT_WS "]+(?![^" MPT_WS "])|[" MPT_WS "]+";
#undef MPT_WS
const char* const kDigitsPattern = "\\p{N}";
const char* const kDigitRunsPattern = "\\p{N}+";

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or -k where k >= 1 is the
// length of the maximal invalid subpart there (replaced by one U+FFFD, WHATWG rule).
inline int utf8_step(const unsigned char* s, size_t n, size_t i) {
  unsigned b = s[i];
  if (b < 0x80) return 1;
  int need;
  unsigned lo = 0x80, hi = 0xBF;  // range of the first continuation byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;  // no overlongs
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;  // no overlongs
    if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return -1;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= n) return -k;
    unsigned c = s[i + k];
    if (c < lo || c > hi) return -k;
    lo = 0x80;
    hi = 0xBF;
  }
  return need + 1;
}

const pcre2_code* as_code(const void* p) { return static_cast<const pcre2_code*>(p); }

std::string pcre2_message(int rc) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(rc, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Runs the pattern over valid UTF-8 `text` and calls on_end(end) for the end of every piece: each
// match, and each stretch of text between matches (Hugging Face's Split, behavior Isolated). An
// empty match makes no piece, and the search goes on one code point further, as Hugging Face's
// iteration over matches does.
template <class OnEnd>
void run_pattern(const pcre2_code* code, std::string_view text, OnEnd&& on_end) {
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  if (!md) throw Error("pretokenize: out of memory for PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  size_t off = 0, cut = 0;
  while (off < n) {
    // The text was validated by the caller, hence NO_UTF_CHECK (pcre2_match would
    // otherwise re-check the whole subject on every call: quadratic).
    const int rc = pcre2_match(code, subject, n, off, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      throw Error("pretokenize: a split pattern failed at byte " + std::to_string(off) + ": " +
                  pcre2_message(rc));
    }
    const size_t begin = ov[0], end = ov[1];
    if (end == begin) {
      off = begin + 1;
      while (off < n && (static_cast<unsigned char>(text[off]) & 0xC0) == 0x80) ++off;
      continue;
    }
    if (begin > cut) on_end(begin);
    on_end(end);
    cut = off = end;
  }
  pcre2_match_data_free(md);
  if (cut < n) on_end(n);
}


// GPT-2's pattern by hand wherever the text is ASCII, PCRE2 for one match wherever a piece's
// extent depends on a character past ASCII. Why by hand: a piece is about four bytes, and a
// pcre2_match call per piece (its setup, then the JIT code) was ~40% of `prepare`'s time; a table
// lookup per byte is not. Why exact: PCRE2 matches the pattern's alternatives in order, leftmost,
// each match starting where the last ended, and the pattern looks only forward ((?!\S)), so a
// match at any offset is the one a run from the start reaches there; the scanner below takes, for
// ASCII, the alternative PCRE2 takes, and hands PCRE2 any piece whose class it cannot tell.
enum AsciiClass : uint8_t { kLetter, kNumber, kSpace, kOther, kBeyondAscii };

struct AsciiClasses {
  AsciiClass of[256];
  constexpr AsciiClasses() : of() {
    for (int c = 0; c < 256; ++c)
      of[c] = c >= 0x80                                 ? kBeyondAscii
              : (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ? kLetter
              : c >= '0' && c <= '9'                    ? kNumber
              : c == ' ' || (c >= '\t' && c <= '\r')    ? kSpace  // White_Space's ASCII members
                                                        : kOther;
  }
};
constexpr AsciiClasses kAscii;

// The end of the piece of GPT-2's pattern that starts at `i`, or 0 when a character past ASCII
// decides it (the caller asks PCRE2).
size_t gpt2_ascii_piece_end(const unsigned char* s, size_t n, size_t i) {
  auto cls = [&](size_t k) { return kAscii.of[s[k]]; };
  AsciiClass c = cls(i);
  if (c == kBeyondAscii) return 0;
  if (s[i] == '\'' && i + 1 < n) {  // 's 't 're 've 'm 'll 'd, before anything else
    const unsigned char a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  }
  size_t run = i;  // where a run of letters, numbers or other symbols starts: after " ?"
  if (s[i] == ' ' && i + 1 < n) {
    const AsciiClass next = cls(i + 1);
    if (next == kBeyondAscii) return 0;
    if (next != kSpace) c = next, run = i + 1;
  }
  size_t k = run + 1;
  while (k < n && cls(k) == c) ++k;
  if (k < n && cls(k) == kBeyondAscii) return 0;  // the run might go on past ASCII
  if (c != kSpace || k == n) return k;
  // \s+(?!\S): a run of spaces before a non-space gives its last space to the next piece
  // (" ?\p{L}+" and the like take it), unless it is the only one (\s+ takes it).
  return k - i >= 2 ? k - 1 : k;
}

// The pieces of valid UTF-8 `text` under GPT-2's pattern (`code`): on_end(end) for each.
template <class OnEnd>
void run_gpt2_pattern(const pcre2_code* code, std::string_view text, OnEnd&& on_end) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  pcre2_match_data* md = nullptr;  // made at the first character past ASCII
  size_t i = 0;
  while (i < n) {
    size_t end = gpt2_ascii_piece_end(s, n, i);
    if (end == 0) {
      if (!md && !(md = pcre2_match_data_create(1, nullptr)))
        throw Error("pretokenize: out of memory for PCRE2 match data");
      // Unanchored (PCRE2's JIT takes no PCRE2_ANCHORED at match time), but some alternative
      // always matches a non-empty piece right here.
      const int rc = pcre2_match(code, s, n, i, PCRE2_NO_UTF_CHECK, md, nullptr);
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (rc < 0 || ov[0] != i || ov[1] <= i) {
        pcre2_match_data_free(md);
        throw Error("pretokenize: GPT-2's pattern matched nothing at byte " + std::to_string(i) +
                    (rc < 0 ? ": " + pcre2_message(rc) : std::string()));
      }
      end = ov[1];
    }
    on_end(end);
    i = end;
  }
  if (md) pcre2_match_data_free(md);
}

}  // namespace

size_t find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (i + 8 <= n) {  // eight ASCII bytes at a time: the common case
      uint64_t w;
      std::memcpy(&w, s + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    int step = utf8_step(s, n, i);
    if (step < 0) return i;
    i += static_cast<size_t>(step);
  }
  return std::string_view::npos;
}

std::string replace_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  std::string out;
  out.reserve(n + 16);
  size_t i = 0;
  while (i < n) {
    int step = utf8_step(s, n, i);
    if (step > 0) {
      out.append(text.data() + i, static_cast<size_t>(step));
      i += static_cast<size_t>(step);
    } else {
      out.append("\xEF\xBF\xBD");
      i += static_cast<size_t>(-step);
    }
  }
  return out;
}

namespace {
pcre2_code* compile(const char* pattern, uint32_t options, const char* what) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED, options,
                                   &err, &err_off, nullptr);
  if (!code)
    throw Error(std::string("pretokenize: PCRE2 rejected the ") + what + " pattern at offset " +
                std::to_string(err_off) + ": " + pcre2_message(err));
  // JIT is a speed-up only: where this PCRE2 lacks it, pcre2_match interprets.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return code;
}
}  // namespace

Gpt2Pretokenizer::Gpt2Pretokenizer(const std::vector<std::string>& patterns) {
  try {
    for (const std::string& p : patterns) {
      codes_.push_back(compile(p.c_str(), PCRE2_UTF | PCRE2_UCP, "split"));
      if (p == kGpt2SplitPattern) gpt2_code_ = codes_.back();
    }
  } catch (...) {
    free_all();
    throw;
  }
}

void Gpt2Pretokenizer::free_all() {
  for (void* code : codes_) pcre2_code_free(static_cast<pcre2_code*>(code));
  codes_.clear();
  gpt2_code_ = nullptr;
}

Gpt2Pretokenizer::~Gpt2Pretokenizer() { free_all(); }

Gpt2Pretokenizer::Gpt2Pretokenizer(Gpt2Pretokenizer&& other) noexcept
    : codes_(std::move(other.codes_)), gpt2_code_(std::exchange(other.gpt2_code_, nullptr)) {
  other.codes_.clear();
}

Gpt2Pretokenizer& Gpt2Pretokenizer::operator=(Gpt2Pretokenizer&& other) noexcept {
  if (this != &other) {
    free_all();
    codes_ = std::move(other.codes_);
    gpt2_code_ = std::exchange(other.gpt2_code_, nullptr);
    other.codes_.clear();
  }
  return *this;
}

void Gpt2Pretokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  if (codes_.empty()) {
    if (!text.empty()) pieces.push_back(text);
    return;
  }
  if (codes_.size() == 1) return split_step(codes_[0], text, pieces);  // GPT-2's: no scratch list
  // Every step but the last cuts the pieces of the one before into a scratch list.
  std::vector<std::string_view> cur{text}, next;
  for (size_t k = 0; k + 1 < codes_.size(); ++k) {
    next.clear();
    for (std::string_view p : cur) split_step(codes_[k], p, next);
    cur.swap(next);
  }
  for (std::string_view p : cur) split_step(codes_.back(), p, pieces);
}

void Gpt2Pretokenizer::split_step(const void* code, std::string_view text,
                                  std::vector<std::string_view>& pieces) const {
  if (text.empty()) return;
  if (find_invalid_utf8(text) == std::string_view::npos) {
    size_t begin = 0;
    auto piece = [&](size_t end) {
      pieces.emplace_back(text.data() + begin, end - begin);
      begin = end;
    };
    if (code == gpt2_code_)
      run_gpt2_pattern(as_code(code), text, piece);
    else
      run_pattern(as_code(code), text, piece);
    return;
  }
  // Invalid UTF-8: build the replaced text and remember, for every run, where it
  // starts in both strings and whether it is a replacement (3 bytes standing for `len`).
  struct Run {
    size_t sub;   // offset in the replaced text
    size_t orig;  // offset in `text`
    bool replaced;
  };
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  std::string sub;
  sub.reserve(n + 16);
  std::vector<Run> runs;
  size_t i = 0;
  while (i < n) {
    int step = utf8_step(s, n, i);
    if (step > 0) {
      if (runs.empty() || runs.back().replaced) runs.push_back({sub.size(), i, false});
      sub.append(text.data() + i, static_cast<size_t>(step));
      i += static_cast<size_t>(step);
    } else {
      runs.push_back({sub.size(), i, true});
      sub.append("\xEF\xBF\xBD");
      i += static_cast<size_t>(-step);
    }
  }
  runs.push_back({sub.size(), n, false});  // sentinel
  // Cuts fall on code point boundaries of `sub`, so inside a replacement never.
  size_t r = 0, begin = 0;
  run_pattern(as_code(code), sub, [&](size_t end_sub) {
    while (r + 2 < runs.size() && runs[r + 1].sub <= end_sub) ++r;
    // Run r now holds end_sub (or, at the very end, ends there).
    size_t end = end_sub == runs[r].sub ? runs[r].orig
                 : runs[r].replaced     ? runs[r + 1].orig
                                        : runs[r].orig + (end_sub - runs[r].sub);
    pieces.emplace_back(text.data() + begin, end - begin);
    begin = end;
  });
}

std::vector<std::string_view> Gpt2Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  split(text, pieces);
  return pieces;
}

}  // namespace mptrain
