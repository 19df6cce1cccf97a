// Corpus preparation: input expansion, document splitting, encoding on every core,
// shard writing through a staging folder, the progress display and the summary.
#include "data/prepare.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <set>
#include <span>
#include <thread>
#include <unordered_set>

#include "core/error.h"
#include "data/gpt2_tokenizer.h"
#include "data/shard.h"
#include "data/topic_task.h"
#include "io/fileutil.h"

namespace fs = std::filesystem;

namespace mptrain {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string with_commas(uint64_t v) {
  const std::string digits = std::to_string(v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string megabytes(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MB", bytes / 1e6);
  return buf;
}

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

// Document i goes to val when the stride floor(i * f) steps up at i + 1.
bool is_val_document(size_t i, double f) {
  return std::floor(static_cast<double>(i + 1) * f) > std::floor(static_cast<double>(i) * f);
}

// Progress on stderr (core/progress.h): a bar redrawn in place on a terminal, a plain
// line every five seconds otherwise (logs, CI), nothing in kNone.
class PrepareProgress {
 public:
  PrepareProgress(uint64_t total, ProgressMode mode)
      : total_(total),
        progress_(
            {.label = "prepare", .total = double(total), .mode = mode, .out = stderr, .line_seconds = 5.0}) {}
  void update(uint64_t done) {
    char status[96];
    std::snprintf(status, sizeof(status), "%.1f/%.1f MB | %.1f MB/s", done / 1e6, total_ / 1e6,
                  progress_.rate(double(done)) / 1e6);
    progress_.draw(double(done), status);
  }
  void finish() { progress_.finish(); }  // the summary replaces the bar

 private:
  uint64_t total_;
  Progress progress_;
};

// Collects one split's token stream and writes it as shards of exactly
// shard_tokens tokens (the last one shorter) into `dir`: uint16 ids in GPT-2's format while the
// vocabulary fits them (what llm.c reads), else uint32 ids (llm.c's Llama 3 format).
class ShardSink {
 public:
  ShardSink(std::string dir, std::string prefix, uint64_t shard_tokens, int vocab_size)
      : dir_(std::move(dir)),
        prefix_(std::move(prefix)),
        shard_tokens_(shard_tokens),
        wide_(vocab_size > 65536) {}

  void append(std::span<const int> ids) {
    if (wide_)
      append_to(wide_ids_, ids);
    else
      append_to(narrow_ids_, ids);
  }
  void finish() {
    if (!wide_ids_.empty()) flush(wide_ids_);
    if (!narrow_ids_.empty()) flush(narrow_ids_);
  }
  uint64_t tokens() const { return tokens_; }
  const std::vector<std::string>& names() const { return names_; }

 private:
  // The ids in the shards' own width, so GPT-2's stream is held (and written) as uint16 once.
  template <class T>
  void append_to(std::vector<T>& buf, std::span<const int> ids) {
    size_t i = 0;
    while (i < ids.size()) {
      size_t take = std::min<size_t>(ids.size() - i, shard_tokens_ - buf.size());
      for (size_t k = 0; k < take; ++k) buf.push_back(static_cast<T>(ids[i + k]));
      i += take;
      if (buf.size() == shard_tokens_) flush(buf);
    }
  }
  template <class T>
  void flush(std::vector<T>& buf) {
    char index[16];
    std::snprintf(index, sizeof(index), "%06zu", names_.size());
    std::string name = prefix_ + index + ".bin";
    write_shard(dir_ + "/" + name, std::span<const T>(buf));
    names_.push_back(name);
    tokens_ += buf.size();
    buf.clear();
  }

  std::string dir_, prefix_;
  uint64_t shard_tokens_;
  bool wide_;
  std::vector<uint16_t> narrow_ids_;  // while the vocabulary fits uint16
  std::vector<uint32_t> wide_ids_;    // past it
  std::vector<std::string> names_;
  uint64_t tokens_ = 0;
};

// Removed with everything in it unless the run gets to the end.
struct StagingDir {
  std::string path;
  ~StagingDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// "<name>_train_000012.bin" or "<name>_val_000000.bin"
bool is_shard_name(const std::string& file, const std::string& name) {
  for (const char* split : {"_train_", "_val_"}) {
    std::string prefix = name + split;
    if (file.size() != prefix.size() + 6 + 4 || !file.starts_with(prefix) || !file.ends_with(".bin"))
      continue;
    if (std::all_of(file.begin() + prefix.size(), file.end() - 4,
                    [](char c) { return c >= '0' && c <= '9'; }))
      return true;
  }
  return false;
}

}  // namespace

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

std::vector<std::string_view> split_for_parallel(std::string_view text, size_t target_bytes) {
  // Why a lone "\n" between printable ASCII characters is a safe cut: the piece that
  // holds the character after it starts right there (only a ' ' can join the piece
  // that follows it), the piece before ends before the "\n" (no alternative crosses
  // from a non-space into a space), and the "\n" is a piece of its own both in the
  // whole text (\s+ after \s+(?!\S) fails) and at the end of a part (\s+(?!\S)).
  auto printable = [](char c) { return c > 0x20 && c < 0x7F; };
  std::vector<std::string_view> parts;
  target_bytes = std::max<size_t>(target_bytes, 1);
  size_t start = 0;
  while (text.size() - start > target_bytes) {
    size_t from = start + target_bytes, cut = std::string_view::npos;
    while (true) {
      size_t nl = text.find('\n', from);
      if (nl == std::string_view::npos || nl + 1 >= text.size()) break;
      if (nl >= 1 && printable(text[nl - 1]) && printable(text[nl + 1])) {
        cut = nl + 1;
        break;
      }
      from = nl + 1;
    }
    if (cut == std::string_view::npos) break;
    parts.push_back(text.substr(start, cut - start));
    start = cut;
  }
  parts.push_back(text.substr(start));
  return parts;
}

std::vector<std::vector<int>> encode_documents(const Gpt2Tokenizer& tok,
                                               const std::vector<std::string_view>& docs, int threads,
                                               size_t parallel_split_bytes,
                                               const std::function<void(uint64_t)>& on_progress) {
  struct Unit {
    size_t doc;
    std::string_view text;
  };
  std::vector<Unit> units;
  units.reserve(docs.size());
  for (size_t d = 0; d < docs.size(); ++d) {
    if (docs[d].size() > parallel_split_bytes)
      for (std::string_view part : split_for_parallel(docs[d], parallel_split_bytes))
        units.push_back({d, part});
    else
      units.push_back({d, docs[d]});
  }
  std::vector<std::vector<int>> unit_ids(units.size());
  const int n_threads =
      static_cast<int>(std::min<size_t>(resolve_threads(threads), std::max<size_t>(units.size(), 1)));

  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{0};
  std::mutex mu;
  std::condition_variable cv;
  int running = n_threads;
  std::exception_ptr error;
  auto work = [&]() {
    try {
      Gpt2Encoder enc(tok);
      while (true) {
        const size_t u = next.fetch_add(1);
        if (u >= units.size()) break;
        unit_ids[u].reserve(units[u].text.size() / 3 + 4);
        enc.encode(units[u].text, unit_ids[u]);
        done.fetch_add(units[u].text.size(), std::memory_order_relaxed);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
      next.store(units.size());
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv.notify_all();
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < n_threads; ++t) pool.emplace_back(work);
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(100));
      if (on_progress) {
        lock.unlock();
        on_progress(done.load(std::memory_order_relaxed));
        lock.lock();
      }
    }
  }
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);

  std::vector<std::vector<int>> out(docs.size());
  for (size_t u = 0; u < units.size(); ++u) {
    auto& dst = out[units[u].doc];
    if (dst.empty())
      dst = std::move(unit_ids[u]);
    else
      dst.insert(dst.end(), unit_ids[u].begin(), unit_ids[u].end());
  }
  return out;
}

PrepareSummary prepare_corpus(const Gpt2Tokenizer& tok, const PrepareOptions& opt) {
  const auto t0 = Clock::now();
  MPT_CHECK(!opt.out_dir.empty(), "prepare: no output folder given");
  MPT_CHECK(opt.shard_tokens >= 1 && opt.shard_tokens <= static_cast<uint64_t>(INT32_MAX),
            "prepare: --shard-tokens must be between 1 and " + std::to_string(INT32_MAX));
  MPT_CHECK(opt.val_fraction >= 0 && opt.val_fraction < 1, "prepare: --val-fraction must be in [0, 1)");
  MPT_CHECK(opt.doc_delimiter.find('\n') == std::string::npos, "prepare: --doc-delimiter must be one line");

  const std::vector<TextFile> files = expand_inputs(opt.inputs, opt.excludes);
  uint64_t total_bytes = 0;
  for (const auto& f : files) total_bytes += f.bytes;
  if (total_bytes == 0)
    throw Error("the inputs hold no text: " + std::to_string(files.size()) + " file(s), all empty (first: '" +
                files.front().path + "')");

  std::string name = opt.name;
  if (name.empty()) {
    fs::path p = fs::absolute(opt.out_dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    name = p.filename().string();
  }
  MPT_CHECK(!name.empty() && name.find('/') == std::string::npos,
            "prepare: invalid shard name '" + name + "'");

  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec) throw Error("cannot create output folder '" + opt.out_dir + "': " + ec.message());
  StagingDir staging{opt.out_dir + "/." + name + ".staging." + std::to_string(::getpid())};
  fs::remove_all(staging.path, ec);
  fs::create_directory(staging.path, ec);
  if (ec) throw Error("cannot create folder '" + staging.path + "': " + ec.message());

  PrepareSummary sum;
  sum.files = files.size();
  sum.threads = resolve_threads(opt.threads);
  const std::unordered_set<std::uint64_t> heldout =
      opt.exclude_docs.empty() ? std::unordered_set<std::uint64_t>{} : read_heldout(opt.exclude_docs);
  ShardSink train(staging.path, name + "_train_", opt.shard_tokens, tok.vocab_size());
  ShardSink val(staging.path, name + "_val_", opt.shard_tokens, tok.vocab_size());
  PrepareProgress progress(total_bytes, opt.progress);
  const std::vector<int> eot{tok.eot()};

  // Blocks of about 64 MB of files at a time bound the memory for text and ids.
  constexpr uint64_t kBlockBytes = 64ull << 20;
  uint64_t bytes_before_block = 0;
  size_t fi = 0;
  while (fi < files.size()) {
    std::deque<std::string> texts;  // a deque: the views below must not move
    std::vector<std::string_view> docs;
    uint64_t block_bytes = 0;
    while (fi < files.size() && (texts.empty() || block_bytes < kBlockBytes)) {
      texts.push_back(read_text_file(files[fi++].path));
      block_bytes += texts.back().size();
      for (std::string_view d : split_documents(texts.back(), opt.doc_delimiter)) {
        if (held_out(heldout, d))
          ++sum.excluded;
        else
          docs.push_back(d);
      }
    }
    auto ids = encode_documents(tok, docs, opt.threads, opt.parallel_split_bytes,
                                [&](uint64_t done) { progress.update(bytes_before_block + done); });
    for (size_t k = 0; k < docs.size(); ++k, ++sum.documents) {
      const bool is_val = is_val_document(sum.documents, opt.val_fraction);
      ShardSink& sink = is_val ? val : train;
      sink.append(eot);  // llm.c: <|endoftext|> (the tokenizer's end of text) before every document
      sink.append(ids[k]);
      sum.val_documents += is_val;
      sum.bytes += docs[k].size();
    }
    bytes_before_block += block_bytes;
    progress.update(bytes_before_block);
  }
  progress.finish();
  if (sum.documents == 0)
    throw Error("the inputs hold no documents: " + std::to_string(files.size()) +
                " file(s) with nothing but delimiter lines '" + opt.doc_delimiter + "'");
  train.finish();
  val.finish();

  // Move the complete set into place, then drop shards of an earlier run that the
  // new set did not overwrite (an earlier run with more shards).
  std::set<std::string> fresh;
  for (const ShardSink* sink : {&val, &train}) {
    for (const auto& n : sink->names()) {
      fs::rename(staging.path + "/" + n, opt.out_dir + "/" + n, ec);
      if (ec) throw Error("cannot move shard into '" + opt.out_dir + "/" + n + "': " + ec.message());
      fresh.insert(n);
    }
  }
  for (const auto& entry : fs::directory_iterator(opt.out_dir, ec)) {
    std::string file = entry.path().filename().string();
    if (is_shard_name(file, name) && !fresh.count(file)) fs::remove(entry.path(), ec);
  }
  fsync_dir(opt.out_dir);

  for (const auto& n : train.names()) sum.train_shards.push_back(opt.out_dir + "/" + n);
  for (const auto& n : val.names()) sum.val_shards.push_back(opt.out_dir + "/" + n);
  sum.train_tokens = train.tokens();
  sum.val_tokens = val.tokens();
  sum.seconds = seconds_since(t0);
  return sum;
}

std::string describe(const PrepareSummary& s) {
  auto count = [](uint64_t n, const char* what) { return with_commas(n) + " " + what + (n == 1 ? "" : "s"); };
  auto shards = [&](const std::vector<std::string>& v) {
    std::string out = count(v.size(), "shard");
    if (!v.empty()) out += ": " + v.front();
    if (v.size() > 1) out += " .. " + v.back();
    return out;
  };
  const uint64_t text_tokens = s.train_tokens + s.val_tokens - s.documents;  // without the separators
  char rate[96], ratio[64];
  std::snprintf(rate, sizeof(rate), "in %.1f s (%.1f MB/s on %s)", s.seconds,
                s.seconds > 0 ? s.bytes / s.seconds / 1e6 : 0.0, count(s.threads, "thread").c_str());
  std::snprintf(ratio, sizeof(ratio), "%.3f", text_tokens ? double(s.bytes) / double(text_tokens) : 0.0);
  std::string out = "prepared " + count(s.documents, "document") + " from " + count(s.files, "file") + ", " +
                    megabytes(s.bytes) + ", " + rate + "\n";
  out += "  train: " + count(s.train_tokens, "token") + ", " +
         count(s.documents - s.val_documents, "document") + ", " + shards(s.train_shards) + "\n";
  out += "  val:   " + count(s.val_tokens, "token") + ", " + count(s.val_documents, "document") + ", " +
         shards(s.val_shards) + "\n";
  out += std::string("  ") + ratio + " bytes per token (" + count(text_tokens, "token") + " of text + " +
         with_commas(s.documents) + " <|endoftext|>)\n";
  if (s.excluded) out += "  " + count(s.excluded, "document") + " held out (--exclude-docs)\n";
  if (s.val_documents == 0)
    out +=
        "  note: no validation documents (raise --val-fraction, or cut files into documents with "
        "--doc-delimiter)\n";
  return out;
}

}  // namespace mptrain
