// Unicode normalization of UTF-8 text (NFC, NFD, NFKC, NFKD) through ICU: the normalizer step of a
// Hugging Face tokenizer.json (Qwen2's is NFC), run before the pre-tokenizer. ICU (Debian's
// libicu-dev, already the source of BERT's Unicode data) holds the composition tables; writing them
// by hand would mean thousands of lines of generated data.
#pragma once
#include <string>
#include <string_view>

namespace mptrain {

enum class UnicodeForm { kNone, kNfc, kNfd, kNfkc, kNfkd };

// "NFC", "NFD", "NFKC" or "NFKD" (tokenizer.json's normalizer types); kNone for anything else.
UnicodeForm unicode_form_of(std::string_view name);

// `text` in `form`. Invalid UTF-8 bytes are kept as they are and normalization runs on the valid
// stretches between them (Hugging Face only ever sees valid text; this keeps every byte of ours).
// ASCII is the same in every form, so all-ASCII text is returned without an ICU call.
std::string normalize_utf8(std::string_view text, UnicodeForm form);

}  // namespace mptrain
