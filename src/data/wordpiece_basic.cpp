// BERT's BasicTokenizer on UTF-8 text, with ICU for the Unicode data (see the header
// for why ICU) and an ASCII fast path (most of any English corpus) that makes no ICU
// call.
#include "data/wordpiece_basic.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "core/error.h"

namespace mptrain {

namespace {

bool is_ascii_punctuation(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}

// Python's str.split() separators left after cleaning (Zs and \t\n\r became ' ';
// the other ASCII separators are Cc and were dropped).
bool is_separator(char32_t c) { return c == U' ' || c == 0x2028 || c == 0x2029; }

std::u16string to_utf16(const std::u32string& s) {
  std::u16string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x10000) {
      out.push_back(static_cast<char16_t>(c));
    } else {
      c -= 0x10000;
      out.push_back(static_cast<char16_t>(0xD800 + (c >> 10)));
      out.push_back(static_cast<char16_t>(0xDC00 + (c & 0x3FF)));
    }
  }
  return out;
}

std::u32string to_utf32(const std::u16string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char32_t c = s[i];
    if (c >= 0xD800 && c < 0xDC00 && i + 1 < s.size() && s[i + 1] >= 0xDC00 && s[i + 1] < 0xE000) {
      c = 0x10000 + ((c - 0xD800) << 10) + (s[i + 1] - 0xDC00);
      ++i;
    }
    out.push_back(c);
  }
  return out;
}

void check_icu(UErrorCode status, const char* what) {
  if (U_FAILURE(status))
    throw Error(std::string("wordpiece: ICU ") + what + " failed: " + u_errorName(status));
}

// Full Unicode lower-casing (root locale: context-sensitive final sigma, U+0130 -> i +
// U+0307), what Python's str.lower() does.
std::u32string icu_lower(const std::u32string& word) {
  const std::u16string src = to_utf16(word);
  std::u16string dst(src.size() * 3 + 4, u'\0');
  UErrorCode status = U_ZERO_ERROR;
  int32_t n =
      u_strToLower(reinterpret_cast<UChar*>(dst.data()), static_cast<int32_t>(dst.size()),
                   reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()), "", &status);
  check_icu(status, "u_strToLower");
  dst.resize(static_cast<size_t>(n));
  return to_utf32(dst);
}

// NFD, then every non-spacing mark (Mn) dropped: tokenization.py's _run_strip_accents.
std::u32string icu_strip_accents(const std::u32string& word) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* nfd = unorm2_getNFDInstance(&status);
  check_icu(status, "unorm2_getNFDInstance");
  const std::u16string src = to_utf16(word);
  std::u16string dst(src.size() * 4 + 8, u'\0');
  int32_t n =
      unorm2_normalize(nfd, reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()),
                       reinterpret_cast<UChar*>(dst.data()), static_cast<int32_t>(dst.size()), &status);
  if (status == U_BUFFER_OVERFLOW_ERROR) {
    status = U_ZERO_ERROR;
    dst.assign(static_cast<size_t>(n), u'\0');
    n = unorm2_normalize(nfd, reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()),
                         reinterpret_cast<UChar*>(dst.data()), n, &status);
  }
  check_icu(status, "NFD normalization");
  dst.resize(static_cast<size_t>(n));
  std::u32string out;
  for (char32_t c : to_utf32(dst))
    if (u_charType(static_cast<UChar32>(c)) != U_NON_SPACING_MARK) out.push_back(c);
  return out;
}

}  // namespace

bool bert_is_whitespace(char32_t c) {
  if (c == U' ' || c == U'\t' || c == U'\n' || c == U'\r') return true;
  if (c < 0x80) return false;
  return u_charType(static_cast<UChar32>(c)) == U_SPACE_SEPARATOR;
}

// google-research/bert's rule: categories Cc and Cf. (Hugging Face's newer copy tests
// every C* category, which also drops private-use and unassigned code points.)
bool bert_is_control(char32_t c) {
  if (c == U'\t' || c == U'\n' || c == U'\r') return false;
  if (c < 0x80) return c < 0x20 || c == 0x7F;
  const int8_t cat = u_charType(static_cast<UChar32>(c));
  return cat == U_CONTROL_CHAR || cat == U_FORMAT_CHAR;
}

bool bert_is_punctuation(char32_t c) {
  if (is_ascii_punctuation(c)) return true;
  if (c < 0x80) return false;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

// The blocks tokenization.py's _is_chinese_char lists (CJK Unified Ideographs and
// extensions A-E, compatibility ideographs); not Hangul, kana or CJK punctuation.
bool bert_is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::u32string decode_utf8_dropping_invalid(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  const size_t n = s.size();
  auto cont = [&](size_t k) { return k < n && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80; };
  while (i < n) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    // Well-formed sequences only (Unicode Table 3-7): no overlongs, surrogates or
    // code points above U+10FFFF; anything else drops its first byte and resyncs.
    char32_t c = 0;
    size_t len = 0;
    if (b >= 0xC2 && b <= 0xDF && cont(i + 1)) {
      c = ((b & 0x1F) << 6) | (s[i + 1] & 0x3F);
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF && cont(i + 1) && cont(i + 2)) {
      const unsigned char b1 = static_cast<unsigned char>(s[i + 1]);
      if ((b == 0xE0 && b1 < 0xA0) || (b == 0xED && b1 >= 0xA0)) {
        ++i;
        continue;
      }
      c = ((b & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (s[i + 2] & 0x3F);
      len = 3;
    } else if (b >= 0xF0 && b <= 0xF4 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      const unsigned char b1 = static_cast<unsigned char>(s[i + 1]);
      if ((b == 0xF0 && b1 < 0x90) || (b == 0xF4 && b1 >= 0x90)) {
        ++i;
        continue;
      }
      c = ((b & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
      len = 4;
    } else {
      ++i;
      continue;
    }
    out.push_back(c);
    i += len;
  }
  return out;
}

BasicTokenizer::BasicTokenizer(BasicTokenizerOptions opt)
    : opt_(opt), strip_accents_(opt.strip_accents < 0 ? opt.lower_case : opt.strip_accents != 0) {
  MPT_CHECK(opt.max_input_chars_per_word > 0, "wordpiece: max_input_chars_per_word must be positive");
}

// One whitespace-separated word: case, accents, then punctuation splitting.
void BasicTokenizer::finish_word(std::u32string& word, std::vector<std::string>& out) const {
  if (word.empty()) return;
  bool ascii = true;
  for (char32_t c : word) ascii &= c < 0x80;
  if (ascii) {
    if (opt_.lower_case)
      for (char32_t& c : word)
        if (c >= U'A' && c <= U'Z') c += 32;
  } else {
    if (opt_.lower_case) word = icu_lower(word);
    if (strip_accents_) word = icu_strip_accents(word);
  }
  std::string piece;
  auto flush = [&]() {
    if (!piece.empty()) out.push_back(std::move(piece));
    piece.clear();
  };
  for (char32_t c : word) {
    if (bert_is_punctuation(c)) {
      flush();
      append_utf8(piece, c);
      flush();
    } else if (is_separator(c) || bert_is_whitespace(c)) {  // tokenization.py splits once more
      flush();
    } else {
      append_utf8(piece, c);
    }
  }
  flush();
  word.clear();
}

void BasicTokenizer::tokenize(std::string_view text, std::vector<std::string>& out) const {
  std::u32string word;
  const std::u32string cps = decode_utf8_dropping_invalid(text);
  for (char32_t c : cps) {
    if (c == 0 || c == 0xFFFD || bert_is_control(c)) continue;  // _clean_text
    if (bert_is_whitespace(c) || is_separator(c)) {
      finish_word(word, out);
    } else if (opt_.split_cjk && bert_is_cjk(c)) {
      finish_word(word, out);
      word.push_back(c);
      finish_word(word, out);
    } else {
      word.push_back(c);
    }
  }
  finish_word(word, out);
}

std::vector<std::string> BasicTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> out;
  tokenize(text, out);
  return out;
}

}  // namespace mptrain
