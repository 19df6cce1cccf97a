// `mptrain prepare` as a library: text files -> documents -> GPT-2 token ids on all
// cores -> train/val token shards in llm.c's format (data/shard.h).
//
// Layout (llm.c's convention): every document is preceded by <|endoftext|> (50256),
// documents never straddle train and val, and each split is cut into shards of exactly
// shard_tokens tokens except its last. Files are <out>/<name>_val_000000.bin, ...,
// <out>/<name>_train_000000.bin, ...; a document is in val when it falls on the
// validation stride: document i (0-based, in input order) is val iff
// floor((i+1)*val_fraction) > floor(i*val_fraction), which spreads the val documents
// evenly through the corpus (a topic-sorted corpus gets a representative val set)
// and gives the same split for any thread count. docs/DATA.md has the details.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/progress.h"  // ProgressMode

namespace mptrain {

class Gpt2Tokenizer;

struct TextFile {
  std::string path;
  uint64_t bytes = 0;
};

// Expands files, folders (recursively: regular files, sorted, hidden entries and
// what `excludes` matches skipped) and glob patterns into readable regular files, each
// once (by canonical path), in the order given. `excludes` are fnmatch(3) patterns
// matched against each file's name. Throws Error for a path that does not exist or
// cannot be read, a glob that matches nothing, or an empty result.
std::vector<TextFile> expand_inputs(const std::vector<std::string>& inputs,
                                    const std::vector<std::string>& excludes);

// Reads a whole file; throws Error naming it.
std::string read_text_file(const std::string& path);

// The documents of one file: the whole text when `delimiter` is empty, otherwise the
// text between lines that are exactly `delimiter` (a "\r" before the newline is
// allowed; the delimiter lines themselves belong to no document). Empty documents are
// dropped. Views into `text`.
std::vector<std::string_view> split_documents(std::string_view text, const std::string& delimiter);

// Cuts text into consecutive parts of at least `target_bytes` (except the last) at
// points where GPT-2's pattern always cuts (a lone "\n" between two printable ASCII
// characters), so that encoding the parts one by one gives exactly the ids of the
// whole: how one long document is spread over every core. Text without such points
// stays in one part.
std::vector<std::string_view> split_for_parallel(std::string_view text, size_t target_bytes);

struct PrepareOptions {
  std::vector<std::string> inputs;    // files, folders, globs
  std::vector<std::string> excludes;  // fnmatch patterns on file names
  std::string doc_delimiter;          // empty: one document per file
  std::string exclude_docs;           // a held-out list (data/topic_task.h) whose texts are left out
  std::string out_dir;
  std::string name;  // shard name prefix; empty: the last component of out_dir
  uint64_t shard_tokens = 100'000'000;
  double val_fraction = 0.01;             // in [0, 1)
  int threads = 0;                        // 0: every core
  size_t parallel_split_bytes = 1 << 20;  // documents longer than this are cut with split_for_parallel
  ProgressMode progress = ProgressMode::kAuto;
};

struct PrepareSummary {
  size_t files = 0;
  size_t documents = 0, val_documents = 0;
  size_t excluded = 0;                        // documents held out by exclude_docs
  uint64_t bytes = 0;                         // bytes of the documents (delimiter lines excluded)
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

// Encodes `docs` on `threads` threads (0: every core) with one Gpt2Encoder per thread;
// result[i] holds the ids of docs[i] (ordinary text, no <|endoftext|>). Long documents
// are spread over threads with split_for_parallel. While the workers run, the calling
// thread calls on_progress(bytes encoded so far) about ten times a second.
// Used by prepare and by the benchmark of `mptrain tokenize --bench`.
std::vector<std::vector<int>> encode_documents(const Gpt2Tokenizer& tok,
                                               const std::vector<std::string_view>& docs, int threads,
                                               size_t parallel_split_bytes = 1 << 20,
                                               const std::function<void(uint64_t)>& on_progress = {});

}  // namespace mptrain
