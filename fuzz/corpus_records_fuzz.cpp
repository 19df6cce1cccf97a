// Fuzzes the corpus reader (data/corpus_reader.h, data/byte_stream.h) on raw file bytes: JSON lines
// records through simdjson and text with delimiter lines, plain or as zstd, gzip or xz streams,
// read in blocks from 1 byte to 1 MiB (fuzz/corpus_records_input.h says how the first byte picks).
// A rejected input must throw mptrain::Error. What is accepted must hold: a JSON record's text is
// valid UTF-8 (simdjson checks it), and plain text gives exactly split_documents of the whole file,
// whatever the block size (the cuts at safe points and delimiter lines lose and add nothing).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../fuzz/corpus_records_input.h"
#include "core/error.h"
#include "data/corpus_reader.h"
#include "data/pretokenize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const mptrain::fuzzing::CorpusInput in = mptrain::fuzzing::corpus_input_mode(data[0]);
  try {
    const std::vector<std::string> docs = mptrain::fuzzing::read_corpus_input(data[0], bytes);
    if (in.json_lines) {
      for (const std::string& d : docs)
        if (mptrain::find_invalid_utf8(d) != std::string_view::npos) __builtin_trap();
    } else if ((data[0] & 3) == 0) {
      const auto whole = mptrain::split_documents(bytes, "%");
      if (whole.size() != docs.size()) __builtin_trap();
      for (size_t i = 0; i < docs.size(); ++i)
        if (docs[i] != whole[i]) __builtin_trap();
    }
  } catch (const mptrain::Error&) {
  }
  return 0;
}
