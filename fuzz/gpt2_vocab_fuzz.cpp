// Fuzzes GPT-2 vocabulary loading (data/gpt2_tokenizer.h, Gpt2Tokenizer::parse): the input is
// encoder.json, a NUL byte, then vocab.bpe (no NUL: all of it is encoder.json and vocab.bpe
// is empty). A rejected vocabulary must throw mptrain::Error. An accepted one must round-trip
// a fixed text and the input's own bytes: decode(encode(x)) == x, with both BPE algorithms
// giving the same ids.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/gpt2_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view encoder = input.substr(0, nul);
  const std::string_view merges = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  try {
    const mptrain::Gpt2Tokenizer tok = mptrain::Gpt2Tokenizer::parse(encoder, merges, "encoder.json", "vocab.bpe");
    for (std::string_view text : {std::string_view("Hello world, it's 2024!\n  <|endoftext|> \xff\xfe"), input}) {
      const std::vector<int> ids = tok.encode(text, mptrain::SpecialTokens::kAllowSpecial);
      if (tok.decode(ids) != text) __builtin_trap();
    }
    // The two BPE algorithms must agree on every piece, short or long.
    std::vector<int> a, b;
    tok.bpe_scan(merges.substr(0, 200), a);
    tok.bpe_heap(merges.substr(0, 200), b);
    if (a != b) __builtin_trap();
  } catch (const mptrain::Error&) {
  }
  return 0;
}
