// Reading a corpus: input expansion, text files and their documents, JSON lines records, each of
// them compressed or not (data/corpus_reader.h).
#include "data/corpus_reader.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <simdjson.h>

#include "core/error.h"
#include "core/parallel_jobs.h"

namespace fs = std::filesystem;

namespace mptrain {

namespace {

std::vector<std::string> split_dots(const std::string& field) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t dot = field.find('.', start);
    parts.push_back(field.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  for (const std::string& p : parts)
    MPT_CHECK(!p.empty(), "--text-field '" + field + "': a dotted path of field names (e.g. text or meta.body)");
  return parts;
}

std::string joined(const std::vector<std::string>& field) {
  std::string s;
  for (const std::string& p : field) s += (s.empty() ? "" : ".") + p;
  return s;
}

}  // namespace

CorpusFormat corpus_format(std::string_view path) {
  const std::string_view name = without_compression_suffix(path);
  if (name.ends_with(".jsonl") || name.ends_with(".json")) return CorpusFormat::JsonLines;
  if (name.ends_with(".parquet")) return CorpusFormat::Parquet;
  return CorpusFormat::Text;
}

std::vector<TextFile> expand_inputs(const std::vector<std::string>& inputs,
                                    const std::vector<std::string>& excludes) {
  if (inputs.empty()) throw Error("no inputs given: name files, folders or glob patterns of text");
  std::vector<TextFile> out;
  std::set<std::string> seen;
  auto excluded = [&](const std::string& path) {
    std::string name = fs::path(path).filename().string();
    for (const auto& pat : excludes)
      if (::fnmatch(pat.c_str(), name.c_str(), 0) == 0) return true;
    return false;
  };
  auto add_file = [&](const std::string& path) {
    if (excluded(path)) return;
    std::error_code ec;
    std::string canon = fs::canonical(path, ec).string();
    if (ec) throw Error("cannot read '" + path + "': " + ec.message());
    if (!seen.insert(canon).second) return;  // a symlink to a file already taken, or a repeat
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw Error("cannot read '" + path + "': " + std::strerror(errno));
    struct stat st {};
    ::fstat(fd, &st);
    ::close(fd);
    out.push_back({path, static_cast<uint64_t>(st.st_size)});
  };
  auto add_dir = [&](const std::string& dir) {
    std::vector<std::string> files;
    std::error_code ec;
    fs::recursive_directory_iterator it(dir, ec);
    if (ec) throw Error("cannot read folder '" + dir + "': " + ec.message());
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) throw Error("cannot read folder '" + dir + "': " + ec.message());
      if (it->path().filename().string().starts_with(".")) {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec)) files.push_back(it->path().string());
    }
    if (ec) throw Error("cannot read folder '" + dir + "': " + ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) add_file(f);
  };
  auto add_path = [&](const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw Error("cannot read '" + path + "': " + std::strerror(errno));
    if (S_ISDIR(st.st_mode))
      add_dir(path);
    else if (S_ISREG(st.st_mode))
      add_file(path);
    else
      throw Error("cannot read '" + path + "': not a regular file or folder");
  };
  for (const auto& input : inputs) {
    struct stat st {};
    if (input.find_first_of("*?[") != std::string::npos && ::stat(input.c_str(), &st) != 0) {
      glob_t g{};
      int rc = ::glob(input.c_str(), 0, nullptr, &g);
      std::vector<std::string> matches;
      if (rc == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) matches.emplace_back(g.gl_pathv[i]);
      ::globfree(&g);
      if (matches.empty()) throw Error("'" + input + "' matches no files");
      for (const auto& m : matches) add_path(m);  // glob(3) returns them sorted
    } else {
      add_path(input);
    }
  }
  if (out.empty()) throw Error("no input files: every file found was excluded");
  return out;
}

std::string read_text_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error("cannot read '" + path + "': " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  std::string data;
  data.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      throw Error("cannot read '" + path + "': " + std::strerror(saved));
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
}

std::vector<std::string_view> split_documents(std::string_view text, const std::string& delimiter) {
  std::vector<std::string_view> docs;
  if (delimiter.empty()) {
    if (!text.empty()) docs.push_back(text);
    return docs;
  }
  size_t doc_start = 0, line_start = 0;
  while (line_start < text.size()) {
    size_t nl = text.find('\n', line_start);
    size_t next = nl == std::string_view::npos ? text.size() : nl + 1;
    std::string_view line =
        text.substr(line_start, (nl == std::string_view::npos ? text.size() : nl) - line_start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line == delimiter) {
      if (line_start > doc_start) docs.push_back(text.substr(doc_start, line_start - doc_start));
      doc_start = next;
    }
    line_start = next;
  }
  if (text.size() > doc_start) docs.push_back(text.substr(doc_start));
  return docs;
}

namespace {

const char* json_type_name(simdjson::dom::element_type t) {
  switch (t) {
    case simdjson::dom::element_type::ARRAY:
      return "an array";
    case simdjson::dom::element_type::OBJECT:
      return "an object";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE:
      return "a number";
    case simdjson::dom::element_type::STRING:
      return "a string";
    case simdjson::dom::element_type::BOOL:
      return "a boolean";
    case simdjson::dom::element_type::NULL_VALUE:
      break;
  }
  return "null";
}

// The text at `field` of the record in line[0, len), whose buffer holds SIMDJSON_PADDING more
// bytes after it, as a view into the parser's buffers (valid until its next parse); Error saying
// what is wrong, without the location. simdjson's DOM parser checks the whole record (its syntax
// and its UTF-8), not only the way to the field.
std::string_view padded_record_text(simdjson::dom::parser& parser, const char* line, size_t len,
                               const std::vector<std::string>& field) {
  simdjson::dom::element at;
  if (const auto error = parser.parse(line, len, false).get(at))
    throw Error(std::string("not a JSON record (") + simdjson::error_message(error) + ")");
  for (const std::string& name : field) {
    if (at.type() != simdjson::dom::element_type::OBJECT)
      throw Error("the record has no field '" + joined(field) + "' (" + json_type_name(at.type()) +
                  " where an object was expected)");
    if (at.get_object().at_key(name).get(at)) throw Error("the record has no field '" + joined(field) + "'");
  }
  std::string_view text;
  if (at.get_string().get(text))
    throw Error("field '" + joined(field) + "' is " + json_type_name(at.type()) + ", not a string");
  return text;
}

}  // namespace

std::string record_text(std::string_view line, const std::vector<std::string>& field) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(line);
  return std::string(padded_record_text(parser, padded.data(), line.size(), field));
}

bool is_safe_cut(std::string_view text, size_t at) {
  auto printable = [](char c) { return c > 0x20 && c < 0x7F; };
  return at >= 2 && at < text.size() && text[at - 1] == '\n' && printable(text[at - 2]) && printable(text[at]);
}

CorpusReader::CorpusReader(const std::vector<TextFile>& files, CorpusReadOptions options, int threads)
    : files_(files), options_(std::move(options)), field_(split_dots(options_.text_field)), threads_(threads) {
  for (const TextFile& f : files)
    if (corpus_format(f.path) == CorpusFormat::Parquet)
      throw Error("'" + f.path +
                  "' is Parquet, which this build cannot read (Debian 12 ships no Parquet library): convert "
                  "it to JSON lines first (docs/DATA.md, \"Parquet\")");
}

struct CorpusReader::Parsers {
  // Each on a cache line of its own: a parser's state is written at every record.
  struct alignas(64) One {
    simdjson::dom::parser parser;
  };
  std::vector<One> each;
};

CorpusReader::~CorpusReader() = default;

void CorpusReader::open_next() {
  in_ = open_byte_stream(files_[next_file_].path);
  json_lines_ = corpus_format(files_[next_file_].path) == CorpusFormat::JsonLines;
  line_number_ = 0;
  pending_.clear();
  pending_continues_ = false;
}

void CorpusReader::close_current() {
  in_.reset();
  bytes_done_ += files_[next_file_++].bytes;
}

bool CorpusReader::fill(uint64_t want) {
  // Grown geometrically (from 4 MiB), so a small file costs no block-sized zero fill; the capacity
  // stays from block to block.
  size_t have = pending_.size();
  while (have < want) {
    if (pending_.size() == have)
      pending_.resize(static_cast<size_t>(std::min<uint64_t>(want, have + std::max<size_t>(have, 4 << 20))));
    const size_t got = in_->read(pending_.data() + have, pending_.size() - have);
    if (got == 0) break;
    have += got;
  }
  pending_.resize(have);
  return have >= want;
}

namespace {

// Where the text read so far may be given out while the file goes on: after its last delimiter
// line (the documents before it are complete, the next text starts one), else, for a document
// longer than a block, at its last safe cut (the next text goes on it); `at` 0 when neither exists.
struct Cut {
  size_t at = 0;
  bool after_delimiter = false;
};

Cut complete_prefix(std::string_view text, const std::string& delimiter) {
  if (!delimiter.empty()) {
    for (size_t end = text.rfind('\n'); end != std::string_view::npos;) {
      const size_t start = end == 0 ? std::string_view::npos : text.rfind('\n', end - 1);
      const size_t from = start == std::string_view::npos ? 0 : start + 1;
      std::string_view line = text.substr(from, end - from);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line == delimiter) return {end + 1, true};
      end = start;
    }
  }
  for (size_t nl = text.rfind('\n'); nl != std::string_view::npos && nl > 0; nl = text.rfind('\n', nl - 1))
    if (is_safe_cut(text, nl + 1)) return {nl + 1, false};
  return {};
}

}  // namespace

void CorpusReader::emit_text(std::deque<std::string>& storage, std::vector<CorpusPiece>& pieces,
                             std::string text) {
  storage.push_back(std::move(text));
  const std::string& held = storage.back();
  for (std::string_view d : split_documents(held, options_.doc_delimiter))
    // The text's first document goes on the one given out in part when nothing (no delimiter line)
    // comes before it.
    pieces.push_back({d, pending_continues_ && d.data() == held.data()});
}

void CorpusReader::take_text(std::deque<std::string>& storage, std::vector<CorpusPiece>& pieces, uint64_t& held,
                             uint64_t block_bytes) {
  bool more = fill(block_bytes - held);
  for (;;) {
    if (!more) {  // the end of the file: all of it is complete
      held += pending_.size();
      emit_text(storage, pieces, std::move(pending_));
      close_current();
      return;
    }
    // A block is full: give out what is complete and keep the rest for the next block. A text with
    // no delimiter line and no safe cut in a whole block (no line breaks) is held until it has one.
    const Cut cut = complete_prefix(pending_, options_.doc_delimiter);
    if (cut.at > 0) {
      std::string rest = pending_.substr(cut.at);
      pending_.resize(cut.at);
      held += pending_.size();
      emit_text(storage, pieces, std::move(pending_));
      pending_ = std::move(rest);
      pending_continues_ = !cut.after_delimiter;
      return;
    }
    more = fill(pending_.size() + (4 << 20));
  }
}

void CorpusReader::take_json_lines(std::deque<std::string>& storage, std::vector<CorpusPiece>& pieces,
                                   uint64_t& held, uint64_t block_bytes) {
  // The block: whole lines up to block_bytes (a longer line whole), read into pending_, whose
  // capacity stays from block to block (no allocation, no page faults, after the first).
  bool more = fill(block_bytes - held);
  size_t end = pending_.size();
  while (more) {
    const size_t nl = pending_.rfind('\n');
    if (nl != std::string::npos) {
      end = nl + 1;
      break;
    }
    more = fill(pending_.size() + (4 << 20));
    end = pending_.size();
  }
  // Parsed in place: simdjson reads up to SIMDJSON_PADDING bytes past a record, which the lines
  // after it, or padding appended for the parse and taken off after it, provide.
  const size_t tail = pending_.size() - end;
  pending_.append(simdjson::SIMDJSON_PADDING, ' ');
  const std::string_view block(pending_.data(), end);
  held += end;
  const std::string path = files_[next_file_].path;
  if (!more) close_current();

  struct Line {
    size_t offset, length;
    uint64_t number;
  };
  std::vector<Line> lines;
  for (size_t at = 0; at < end;) {
    const size_t nl = std::min(block.find('\n', at), end);
    ++line_number_;
    const std::string_view line(block.data() + at, nl - at);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos)  // a blank line is no record
      lines.push_back({at, nl - at, line_number_});
    at = nl + 1;
  }
  // Chunks of consecutive records parsed on every thread (a parser each), each chunk's texts back
  // to back in one buffer (no allocation per record), taken in order: the same documents, and the
  // same first error, whatever the thread count.
  struct Chunk {
    std::string texts;
    std::vector<size_t> ends;                             // of each good record's text in `texts`
    std::vector<std::pair<size_t, std::string>> errors;   // (line index, what is wrong), in order
  };
  const size_t per_chunk =
      std::max<size_t>(64, lines.size() / (static_cast<size_t>(worker_threads(threads_)) * 16) + 1);
  std::vector<Chunk> chunks((lines.size() + per_chunk - 1) / per_chunk);
  if (!parsers_) parsers_ = std::make_unique<Parsers>();
  parsers_->each.resize(static_cast<size_t>(worker_threads(threads_)));
  run_jobs(chunks.size(), threads_, [&](size_t c, size_t worker) {
    simdjson::dom::parser& parser = parsers_->each[worker].parser;
    Chunk chunk;  // the thread's own, moved into place once (no cache line shared while it grows)
    for (size_t i = c * per_chunk; i < std::min(lines.size(), (c + 1) * per_chunk); ++i) {
      try {
        chunk.texts += padded_record_text(parser, block.data() + lines[i].offset, lines[i].length, field_);
        chunk.ends.push_back(chunk.texts.size());
      } catch (const Error& e) {
        chunk.errors.emplace_back(i, e.what());
      }
    }
    chunks[c] = std::move(chunk);
  });
  pending_.resize(end + tail);
  pending_.erase(0, end);
  for (size_t c = 0; c < chunks.size(); ++c) {
    Chunk& chunk = chunks[c];
    if (!chunk.errors.empty()) {
      const auto& [i, what] = chunk.errors.front();
      if (!options_.skip_bad_records)
        throw Error("'" + path + "' line " + std::to_string(lines[i].number) + ": " + what +
                    " (--skip-bad-records counts such records and goes on)");
      bad_records_ += chunk.errors.size();
    }
    storage.push_back(std::move(chunk.texts));
    const std::string& texts = storage.back();
    // An empty text is still a record, so a document of <|endoftext|> alone: what llm.c's
    // fineweb.py writes for it.
    for (size_t k = 0, begin = 0; k < chunk.ends.size(); begin = chunk.ends[k++])
      pieces.push_back({std::string_view(texts).substr(begin, chunk.ends[k] - begin), false});
  }
}

bool CorpusReader::next_block(std::deque<std::string>& storage, std::vector<CorpusPiece>& pieces,
                              uint64_t block_bytes) {
  uint64_t held = 0;
  bool read_any = false;
  block_bytes = std::max<uint64_t>(block_bytes, 1);
  // A block goes on into the next file when one ends before the block is full.
  while (next_file_ < files_.size() && held < block_bytes) {
    read_any = true;
    if (!in_) open_next();
    if (json_lines_)
      take_json_lines(storage, pieces, held, block_bytes);
    else
      take_text(storage, pieces, held, block_bytes);
  }
  return read_any;
}

}  // namespace mptrain
