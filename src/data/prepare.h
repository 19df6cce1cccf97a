// `mptrain prepare` as a library: text files and JSON lines records, compressed or not
// (data/corpus_reader.h) -> documents -> GPT-2 token ids on all cores -> train/val token shards in
// llm.c's format (data/shard.h), a block of about 64 MB at a time whatever the inputs' size.
//
// Layout (llm.c's convention): every document is preceded by <|endoftext|> (50256), and each
// split is cut into shards of exactly shard_tokens tokens except its last. Validation is, by
// default, what llm.c's fineweb.py makes it: the stream's first shard_tokens tokens are
// <out>/<name>_val_000000.bin and the rest <name>_train_000001.bin, ... (the document that
// crosses the line is cut there, as fineweb.py cuts it). With a val_fraction, documents never
// straddle train and val: document i (0-based, in input order) is val iff
// floor((i+1)*val_fraction) > floor(i*val_fraction), which spreads the val documents evenly
// through the corpus (a topic-sorted corpus gets a representative val set); the files are then
// <name>_val_000000.bin, ... and <name>_train_000000.bin, .... Either split is the same for any
// thread count. docs/DATA.md has the details.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/progress.h"  // ProgressMode
#include "data/corpus_reader.h"

namespace mptrain {

class Gpt2Tokenizer;

// Cuts text into consecutive parts of at least `target_bytes` (except the last) at points
// where GPT-2's pattern always cuts (is_safe_cut), so that encoding the parts one by one
// gives exactly the ids of the whole: how one long document is spread over every core.
// Text without such points stays in one part.
std::vector<std::string_view> split_for_parallel(std::string_view text, size_t target_bytes);

struct PrepareOptions {
  std::vector<std::string> inputs;    // files, folders, globs: text or JSON lines, compressed or not
  std::vector<std::string> excludes;  // fnmatch patterns on file names
  std::string doc_delimiter;          // text files; empty: one document per file
  std::string text_field = "text";    // JSON lines: each record's text (a dotted path for nested fields)
  bool skip_bad_records = false;      // JSON lines: count a bad record and go on
  std::string exclude_docs;           // a held-out list (data/topic_task.h) whose texts are left out
  std::string out_dir;
  std::string name;  // shard name prefix; empty: the last component of out_dir
  uint64_t shard_tokens = 100'000'000;  // llm.c's fineweb.py's shard size
  std::optional<double> val_fraction;   // in [0, 1); none: the first shard is validation (llm.c)
  int threads = 0;                        // 0: every core
  size_t parallel_split_bytes = 1 << 20;  // documents longer than this are cut with split_for_parallel
  uint64_t block_bytes = 64ull << 20;     // text read, encoded and written at a time (the memory bound)
  ProgressMode progress = ProgressMode::kAuto;
};

struct PrepareSummary {
  size_t files = 0;
  size_t documents = 0, val_documents = 0;
  size_t excluded = 0;                        // documents held out by exclude_docs
  size_t bad_records = 0;                     // JSON lines skipped with skip_bad_records
  uint64_t bytes = 0;                         // bytes of the documents (delimiter lines excluded)
  bool first_shard_val = false;               // val is the stream's first shard (no val_fraction)
  uint64_t train_tokens = 0, val_tokens = 0;  // <|endoftext|> included
  std::vector<std::string> train_shards, val_shards;
  int threads = 0;
  double seconds = 0;
};

// Runs the whole preparation. Shards are written to a staging folder inside out_dir
// and moved into place only when every one of them is complete; shards of an earlier
// run with the same name are then removed, so a failed run never leaves a mixed set.
PrepareSummary prepare_corpus(const Gpt2Tokenizer& tok, const PrepareOptions& opt);

// A few lines for the terminal: documents, tokens, shards, bytes per token, speed.
std::string describe(const PrepareSummary& s);

// The ids of a list of documents, one after another in one buffer: document i's are of(i).
struct EncodedDocuments {
  std::vector<int> ids;
  std::vector<size_t> ends;  // document i's ids end at ends[i] (and start at ends[i - 1], or 0)
  size_t size() const { return ends.size(); }
  std::span<const int> of(size_t i) const {
    const size_t begin = i == 0 ? 0 : ends[i - 1];
    return {ids.data() + begin, ends[i] - begin};
  }
};

// Encodes `docs` on `threads` threads (0: every core) with one Gpt2Encoder per thread into `out`
// (ordinary text, no <|endoftext|>; its buffers are reused, so a caller that encodes block after
// block allocates once). Consecutive documents go to the threads in jobs of about 256 KB, each
// encoded into a buffer of its own and copied into place, so that a corpus of many short documents
// costs no allocation per document; long documents are spread over threads with
// split_for_parallel. While the workers run, the calling thread first calls meanwhile() (prepare
// writes the block before into its shards there), then on_progress(bytes encoded so far) about ten
// times a second. Used by prepare and by `mptrain tokenize --bench`.
void encode_documents(const Gpt2Tokenizer& tok, const std::vector<std::string_view>& docs, int threads,
                      EncodedDocuments& out, size_t parallel_split_bytes = 1 << 20,
                      const std::function<void(uint64_t)>& on_progress = {},
                      const std::function<void()>& meanwhile = {});

}  // namespace mptrain
