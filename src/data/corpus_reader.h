// The documents of a corpus as `prepare` reads them, block by block in bounded memory: plain text
// files (a document a file, or documents between delimiter lines) and JSON lines (.jsonl/.json: a
// document a record, its text at a field), either of them compressed (.zst, .gz, .xz: decompressed
// as a stream, data/byte_stream.h). Hugging Face datasets' JSON export, TinyStories and
// OpenWebText2 ship as JSON lines; The Pile as .jsonl.zst; most datasets' shards as .json.gz.
// Parquet (the hub's own format) has no library in Debian 12: refused with one line that says how
// to convert it.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <memory>

#include "data/byte_stream.h"

namespace mptrain {

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

// Whether `text` may be cut before `at` without changing GPT-2's pieces (nor WordPiece's
// whitespace split): text[at - 1] is a lone "\n" between printable ASCII characters. The piece that
// holds the character after it starts right there (only a ' ' can join the piece that follows
// it), the piece before ends before the "\n" (no alternative crosses from a non-space into a
// space), and the "\n" is a piece of its own both in the whole text (\s+ after \s+(?!\S) fails)
// and at the end of a part (\s+(?!\S)). What lets a long document be encoded in parts, on every
// thread and a block at a time, with the ids of the whole.
bool is_safe_cut(std::string_view text, size_t at);

// The documents of one file: the whole text when `delimiter` is empty, otherwise the
// text between lines that are exactly `delimiter` (a "\r" before the newline is
// allowed; the delimiter lines themselves belong to no document). Empty documents are
// dropped. Views into `text`.
std::vector<std::string_view> split_documents(std::string_view text, const std::string& delimiter);

enum class CorpusFormat { Text, JsonLines, Parquet };
// By the file name, a compression suffix (.zst, .gz, .xz) set aside: .jsonl and .json are JSON
// lines, .parquet Parquet, anything else text.
CorpusFormat corpus_format(std::string_view path);

// A document, or a part of one too long to hold in a block: `continues` says it goes on the
// document of the piece before it (cut where is_safe_cut allows, so its ids are the whole's).
struct CorpusPiece {
  std::string_view text;
  bool continues = false;
};

struct CorpusReadOptions {
  std::string doc_delimiter;        // text files: "" = one document a file
  std::string text_field = "text";  // JSON lines: the record's text, a dotted path for nested fields
  bool skip_bad_records = false;    // count a malformed record and go on, instead of one Error
};

// The text of one JSON line at `field` (a dotted path, split): Error saying what is wrong (not
// JSON, not an object, no such field, not a string), without the location.
std::string record_text(std::string_view line, const std::vector<std::string>& field);

class CorpusReader {
 public:
  // Refuses a Parquet file (one Error naming it and the conversion) before anything is read.
  CorpusReader(const std::vector<TextFile>& files, CorpusReadOptions options, int threads);
  ~CorpusReader();
  // Appends the next pieces, in input order, to `pieces` (views into strings appended to
  // `storage`, which must not move them: a deque), until about `block_bytes` of text are held or
  // the inputs end; false when nothing was left. Every file is read as a stream: a text file's
  // documents a block at a time (one longer than a block in parts, at safe cuts), a JSON lines
  // file's records a block at a time, each record parsed on every thread; a bad record is an Error
  // naming the file and its line (or, with skip_bad_records, counted).
  bool next_block(std::deque<std::string>& storage, std::vector<CorpusPiece>& pieces, uint64_t block_bytes);
  // Bytes of the files read so far (a compressed file's compressed bytes): the progress measure.
  uint64_t file_bytes_done() const { return bytes_done_ + (in_ ? in_->file_bytes_read() : 0); }
  size_t bad_records() const { return bad_records_; }

 private:
  void open_next();
  void close_current();
  // Reads the current file on into pending_ until it holds `want` bytes; false when it ended first.
  bool fill(uint64_t want);
  void take_text(std::deque<std::string>& storage, std::vector<CorpusPiece>& pieces, uint64_t& held,
                 uint64_t block_bytes);
  void take_json_lines(std::deque<std::string>& storage, std::vector<CorpusPiece>& pieces, uint64_t& held,
                       uint64_t block_bytes);
  void emit_text(std::deque<std::string>& storage, std::vector<CorpusPiece>& pieces, std::string text);

  std::vector<TextFile> files_;
  CorpusReadOptions options_;
  std::vector<std::string> field_;  // text_field split at its dots
  int threads_;
  size_t next_file_ = 0;                // the file being read, or the next to open
  std::unique_ptr<ByteStream> in_;      // the file being read, if any
  bool json_lines_ = false;             // it is JSON lines
  uint64_t line_number_ = 0;            // JSON lines: the lines given out so far
  std::string pending_;                 // read but not yet given out
  bool pending_continues_ = false;      // text: pending_ goes on a document already given out in part
  struct Parsers;                   // simdjson's, one a thread (its header kept out of this one)
  std::unique_ptr<Parsers> parsers_;
  uint64_t bytes_done_ = 0;  // of the files finished
  size_t bad_records_ = 0;
};

}  // namespace mptrain
