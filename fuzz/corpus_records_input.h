// What the corpus_records fuzz target (fuzz/corpus_records_fuzz.cpp) and its seed-corpus test
// (tests/data/test_parsers_fuzz_corpus.cpp) do with an input: the first byte picks the file's kind
// (bits 0-1: plain, .zst, .gz, .xz; bit 2: JSON lines, else text with '%' delimiter lines; bit 3:
// --skip-bad-records; bits 4-5: a block of 1, 64, 4096 or 1 MiB bytes), the rest is the file's
// bytes. It is written to a temporary file of that name and read with CorpusReader on one thread;
// the documents come back, their parts joined. Header-only, so that both builds take it as is.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus_reader.h"

namespace mptrain::fuzzing {

struct CorpusInput {
  std::string suffix;  // e.g. ".jsonl.zst"
  bool json_lines = false;
  CorpusReadOptions options;
  uint64_t block_bytes = 1;
};

inline CorpusInput corpus_input_mode(uint8_t mode) {
  CorpusInput in;
  in.json_lines = (mode & 4) != 0;
  in.suffix = in.json_lines ? ".jsonl" : ".txt";
  static const char* const compressed[] = {"", ".zst", ".gz", ".xz"};
  in.suffix += compressed[mode & 3];
  if (!in.json_lines) in.options.doc_delimiter = "%";
  in.options.skip_bad_records = (mode & 8) != 0;
  static const uint64_t blocks[] = {1, 64, 4096, 1 << 20};
  in.block_bytes = blocks[(mode >> 4) & 3];
  return in;
}

// The documents of `bytes` (after the mode byte) read as corpus_input_mode(mode) says; Error as
// CorpusReader throws it. `bad` receives the bad records skipped.
inline std::vector<std::string> read_corpus_input(uint8_t mode, std::string_view bytes, size_t* bad = nullptr) {
  const CorpusInput in = corpus_input_mode(mode);
  const std::string path = "/tmp/mptrain-fuzz-corpus-" + std::to_string(::getpid()) + in.suffix;
  struct Remove {
    const std::string& p;
    ~Remove() { std::remove(p.c_str()); }
  } remove{path};
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return {};
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  CorpusReader reader({{path, bytes.size()}}, in.options, 1);
  std::vector<std::string> docs;
  for (;;) {
    std::deque<std::string> storage;
    std::vector<CorpusPiece> pieces;
    if (!reader.next_block(storage, pieces, in.block_bytes)) break;
    for (const CorpusPiece& p : pieces) {
      if (p.continues && !docs.empty())
        docs.back() += p.text;
      else
        docs.emplace_back(p.text);
    }
  }
  if (bad) *bad = reader.bad_records();
  return docs;
}

}  // namespace mptrain::fuzzing
