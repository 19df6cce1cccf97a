// Fuzzes the classification-file reader (data/classify_data.h, parse_classify_text): the first
// byte picks JSON lines or TSV, a header or none, single sentences or pairs; the rest is the
// file. Every example it accepts must be [CLS] ... [SEP] within max_seq_len, one segment id per
// token, a label in [0, num_labels); anything else must be a mptrain::Error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/classify_data.h"
#include "data/wordpiece.h"

namespace {

const mptrain::WordpieceTokenizer& tokenizer() {
  static const mptrain::WordpieceTokenizer tok(mptrain::WordpieceVocab::from_tokens(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "film", "##s", "the", "?", "."}, "fuzz"));
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  mptrain::ClassifyReadOptions opt;
  opt.header = (mode & 2) == 0;
  if (mode & 4) opt.columns = {"question", "sentence", "label"};
  if (!opt.header) opt.columns = {"0", (mode & 4) ? "1" : "", (mode & 4) ? "2" : "1"};
  opt.label_names = {"entailment", "not_entailment"};
  opt.max_seq_len = 5 + (mode >> 4);
  try {
    const std::vector<mptrain::ClassifyExample> ex =
        mptrain::parse_classify_text(text, (mode & 1) != 0, "fuzz.tsv", tokenizer(), opt);
    for (const mptrain::ClassifyExample& e : ex)
      if (e.ids.size() < 2 || e.ids.size() > static_cast<size_t>(opt.max_seq_len) || e.types.size() != e.ids.size() ||
          e.ids.front() != tokenizer().special().cls || e.ids.back() != tokenizer().special().sep || e.label < 0 ||
          e.label >= opt.num_labels)
        __builtin_trap();
  } catch (const mptrain::Error&) {
  }
  return 0;
}
