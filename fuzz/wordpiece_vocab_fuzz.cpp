// Fuzzes BERT's vocab.txt reader (data/wordpiece.h, WordpieceVocab::parse) and the WordPiece
// tokenizer built on what it accepts: a fixed text and the input's own bytes are encoded
// (every id must be in the vocabulary) and decoded. A rejected vocabulary must throw
// mptrain::Error.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/wordpiece.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    mptrain::WordpieceTokenizer tok(mptrain::WordpieceVocab::parse(text, "vocab.txt"));
    for (std::string_view s : {std::string_view("The cat sat, naïve [MASK] 東京 \xff!"), text}) {
      const std::vector<int> ids = tok.encode(s, mptrain::BertSpecialText::kRecognize);
      for (int id : ids)
        if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
      (void)tok.decode(ids, /*skip_special=*/true);
    }
  } catch (const mptrain::Error&) {
  }
  return 0;
}
