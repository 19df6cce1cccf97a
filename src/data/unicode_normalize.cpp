// Unicode normalization of UTF-8 through ICU's Normalizer2 (data/unicode_normalize.h).
#include "data/unicode_normalize.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include "core/error.h"
#include "data/pretokenize.h"

namespace mptrain {

namespace {

const icu::Normalizer2& normalizer_of(UnicodeForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case UnicodeForm::kNfc:
      n = icu::Normalizer2::getNFCInstance(status);
      break;
    case UnicodeForm::kNfd:
      n = icu::Normalizer2::getNFDInstance(status);
      break;
    case UnicodeForm::kNfkc:
      n = icu::Normalizer2::getNFKCInstance(status);
      break;
    case UnicodeForm::kNfkd:
      n = icu::Normalizer2::getNFKDInstance(status);
      break;
    case UnicodeForm::kNone:
      break;
  }
  if (U_FAILURE(status) || !n)
    throw Error(std::string("unicode normalization: ICU has no normalizer (") + u_errorName(status) + ")");
  return *n;
}

bool all_ascii(std::string_view text) {
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

void append_normalized(const icu::Normalizer2& n, std::string_view valid, std::string& out) {
  if (valid.empty()) return;
  icu::StringByteSink<std::string> sink(&out);
  UErrorCode status = U_ZERO_ERROR;
  n.normalizeUTF8(0, icu::StringPiece(valid.data(), static_cast<int32_t>(valid.size())), sink, nullptr,
                  status);
  if (U_FAILURE(status))
    throw Error(std::string("unicode normalization: ICU failed: ") + u_errorName(status));
}

}  // namespace

UnicodeForm unicode_form_of(std::string_view name) {
  if (name == "NFC") return UnicodeForm::kNfc;
  if (name == "NFD") return UnicodeForm::kNfd;
  if (name == "NFKC") return UnicodeForm::kNfkc;
  if (name == "NFKD") return UnicodeForm::kNfkd;
  return UnicodeForm::kNone;
}

std::string normalize_utf8(std::string_view text, UnicodeForm form) {
  if (form == UnicodeForm::kNone || all_ascii(text)) return std::string(text);
  const icu::Normalizer2& n = normalizer_of(form);
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  // Valid stretches normalized; each invalid byte copied between them.
  while (!text.empty()) {
    const size_t bad = find_invalid_utf8(text);
    append_normalized(n, text.substr(0, bad), out);
    if (bad == std::string_view::npos) break;
    out.push_back(text[bad]);
    text.remove_prefix(bad + 1);
  }
  return out;
}

}  // namespace mptrain
