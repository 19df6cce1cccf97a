// Corpus preparation: a corpus read block by block (data/corpus_reader.h), encoding on every
// core, the train/val split, shard writing through a staging folder, the progress display and
// the summary.
#include "data/prepare.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <tuple>
#include <unordered_set>

#include "core/error.h"
#include "core/parallel_jobs.h"
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
  // `done` bytes of the files (compressed ones counted compressed) of the total, with the
  // documents and tokens written so far.
  void update(uint64_t done, size_t documents, uint64_t tokens) {
    char status[160];
    std::snprintf(status, sizeof(status), "%.1f/%.1f MB | %s docs | %s tokens | %.1f MB/s", done / 1e6,
                  total_ / 1e6, with_commas(documents).c_str(), with_commas(tokens).c_str(),
                  progress_.rate(double(done)) / 1e6);
    progress_.draw(double(done), status);
  }
  void finish() { progress_.finish(); }  // the summary replaces the bar

 private:
  uint64_t total_;
  Progress progress_;
};

// Writes a token stream as shards of exactly shard_tokens tokens (the last one shorter) into
// `dir`, the k-th named by `name_of(k)`, each written as its tokens come (ShardWriter: bounded
// memory whatever the shard size): uint16 ids in GPT-2's format while the vocabulary fits them
// (what llm.c reads), else uint32 ids (llm.c's Llama 3 format).
class ShardSink {
 public:
  ShardSink(std::string dir, std::function<std::string(size_t)> name_of, uint64_t shard_tokens, int vocab_size)
      : dir_(std::move(dir)), name_of_(std::move(name_of)), shard_tokens_(shard_tokens), wide_(vocab_size > 65536) {}

  void append(std::span<const int> ids) {
    while (!ids.empty()) {
      if (!current_) current_.emplace(dir_ + "/" + name_of_(shards_.size()), wide_);
      const size_t take = std::min<size_t>(ids.size(), shard_tokens_ - current_->size());
      current_->append(ids.first(take));
      ids = ids.subspan(take);
      if (current_->size() == shard_tokens_) finish_current();
    }
  }
  void finish() {
    if (current_) finish_current();
  }
  // Tokens taken so far.
  uint64_t tokens() const { return written_ + (current_ ? current_->size() : 0); }
  uint64_t shard_tokens() const { return shard_tokens_; }
  // The shards written, with their tokens.
  const std::vector<std::pair<std::string, uint64_t>>& shards() const { return shards_; }

 private:
  void finish_current() {
    current_->finish();
    shards_.emplace_back(name_of_(shards_.size()), current_->size());
    written_ += current_->size();
    current_.reset();
  }

  std::string dir_;
  std::function<std::string(size_t)> name_of_;
  uint64_t shard_tokens_;
  bool wide_;
  std::optional<ShardWriter> current_;  // the shard being written, if any
  std::vector<std::pair<std::string, uint64_t>> shards_;
  uint64_t written_ = 0;
};

// "<name>_<split>_000012.bin"
std::string shard_name(const std::string& name, const char* split, size_t index) {
  char digits[16];
  std::snprintf(digits, sizeof(digits), "%06zu", index);
  return name + "_" + split + "_" + digits + ".bin";
}

// Where each document goes: with a val fraction, whole documents on the validation stride into
// a sink of their own; without one, llm.c's layout, one stream whose first shard is val.
class Splits {
 public:
  Splits(const std::string& dir, const std::string& name, const PrepareOptions& opt, int vocab_size)
      : fraction_(opt.val_fraction),
        train_(dir,
               [name, first_val = !fraction_](size_t k) {
                 return shard_name(name, first_val && k == 0 ? "val" : "train", k);
               },
               opt.shard_tokens, vocab_size) {
    if (fraction_)
      val_.emplace(dir, [name](size_t k) { return shard_name(name, "val", k); }, opt.shard_tokens, vocab_size);
  }
  // The sink of the next document, the `index`-th; `is_val` says whether it (or, in llm.c's
  // layout, its start) is validation.
  ShardSink& sink_for(size_t index, bool& is_val) {
    if (fraction_) {
      is_val = is_val_document(index, *fraction_);
      return is_val ? *val_ : train_;
    }
    is_val = train_.tokens() < train_.shard_tokens();
    return train_;
  }
  uint64_t tokens() const { return train_.tokens() + (val_ ? val_->tokens() : 0); }
  void finish() {
    train_.finish();
    if (val_) val_->finish();
  }
  // Every shard written, with its tokens and whether it is validation.
  std::vector<std::tuple<std::string, uint64_t, bool>> shards() const {
    std::vector<std::tuple<std::string, uint64_t, bool>> out;
    if (val_)
      for (const auto& [n, t] : val_->shards()) out.emplace_back(n, t, true);
    for (size_t k = 0; k < train_.shards().size(); ++k)
      out.emplace_back(train_.shards()[k].first, train_.shards()[k].second, !fraction_ && k == 0);
    return out;
  }

 private:
  std::optional<double> fraction_;
  ShardSink train_;                // the training split, or in llm.c's layout the whole stream
  std::optional<ShardSink> val_;   // with a val fraction
};

// Removed with everything in it unless the run gets to the end.
struct StagingDir {
  std::string path;
  ~StagingDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// The staging folders of runs with this name whose process is gone (killed, or stopped by Ctrl-C:
// prepare does not catch signals, so their folder stays), removed so that they do not pile up.
void remove_stale_staging(const std::string& out_dir, const std::string& name) {
  const std::string prefix = "." + name + ".staging.";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (!file.starts_with(prefix) || file.size() == prefix.size()) continue;
    const std::string pid = file.substr(prefix.size());
    if (!std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; }) || pid.size() > 9)
      continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), ec);
  }
}

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

std::vector<std::string_view> split_for_parallel(std::string_view text, size_t target_bytes) {
  std::vector<std::string_view> parts;
  target_bytes = std::max<size_t>(target_bytes, 1);
  size_t start = 0;
  while (text.size() - start > target_bytes) {
    size_t from = start + target_bytes, cut = std::string_view::npos;
    while (true) {
      size_t nl = text.find('\n', from);
      if (nl == std::string_view::npos || nl + 1 >= text.size()) break;
      if (is_safe_cut(text, nl + 1)) {
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

void encode_documents(const Gpt2Tokenizer& tok, const std::vector<std::string_view>& docs, int threads,
                      EncodedDocuments& out, size_t parallel_split_bytes,
                      const std::function<void(uint64_t)>& on_progress, const std::function<void()>& meanwhile) {
  // Units: the documents, a long one in parts (consecutive, so its ids are the parts' in order).
  struct Unit {
    size_t doc;
    std::string_view text;
  };
  std::vector<Unit> units;
  units.reserve(docs.size());
  for (size_t d = 0; d < docs.size(); ++d) {
    if (docs[d].size() > parallel_split_bytes)
      for (std::string_view part : split_for_parallel(docs[d], parallel_split_bytes)) units.push_back({d, part});
    else
      units.push_back({d, docs[d]});
  }
  // Jobs: runs of consecutive units of about kJobBytes, each encoded into a buffer of its own.
  constexpr size_t kJobBytes = 256 << 10;
  std::vector<size_t> job_first{0};  // job j holds units [job_first[j], job_first[j + 1])
  for (size_t u = 0, bytes = 0; u < units.size(); ++u) {
    bytes += units[u].text.size();
    if (bytes >= kJobBytes && u + 1 < units.size()) job_first.push_back(u + 1), bytes = 0;
  }
  job_first.push_back(units.size());
  const size_t jobs = job_first.size() - 1;
  std::vector<std::vector<int>> job_ids(jobs);
  std::vector<size_t> unit_end(units.size());  // within its job's buffer
  std::vector<std::unique_ptr<Gpt2Encoder>> encoders(static_cast<size_t>(worker_threads(threads)));
  std::atomic<uint64_t> done{0};
  run_jobs(
      jobs, threads,
      [&](size_t j, size_t worker) {
        if (!encoders[worker]) encoders[worker] = std::make_unique<Gpt2Encoder>(tok);  // its merge cache
        // Encoded into a vector of the worker's own and moved into place once: the slots of jobs
        // j and j + 1 share a cache line, and a push_back into a slot while the other thread
        // pushes into its neighbour bounced that line between the cores at every token (2 threads
        // ran 1.3x one).
        std::vector<int> ids;
        uint64_t bytes = 0;
        for (size_t u = job_first[j]; u < job_first[j + 1]; ++u) bytes += units[u].text.size();
        ids.reserve(bytes / 3 + 16);
        for (size_t u = job_first[j]; u < job_first[j + 1]; ++u) {
          encoders[worker]->encode(units[u].text, ids);
          unit_end[u] = ids.size();
        }
        job_ids[j] = std::move(ids);
        done.fetch_add(bytes, std::memory_order_relaxed);
      },
      meanwhile, [&] {
        if (on_progress) on_progress(done.load(std::memory_order_relaxed));
      });

  // The jobs' buffers one after another; a document ends where its last unit does.
  size_t total = 0;
  for (const auto& v : job_ids) total += v.size();
  out.ids.resize(total);
  out.ends.assign(docs.size(), 0);
  size_t at = 0;
  for (size_t j = 0; j < jobs; ++j) {
    std::copy(job_ids[j].begin(), job_ids[j].end(), out.ids.begin() + static_cast<std::ptrdiff_t>(at));
    for (size_t u = job_first[j]; u < job_first[j + 1]; ++u) out.ends[units[u].doc] = at + unit_end[u];
    at += job_ids[j].size();
  }
}

namespace {

// The corpus, block by block, into the splits' shards. Blocks of block_bytes (64 MiB) of text at a
// time bound the memory for text and ids, whatever the inputs' size (every file is read as a
// stream, data/corpus_reader.h), and three things overlap: the next block is read (and its records
// parsed) on a thread of its own, this one is encoded on `threads` workers, and the calling thread,
// idle while they work, writes the block before into the shards. Nothing but the order of blocks is
// shared, so the shards are the same for any thread count.
void encode_and_write(const Gpt2Tokenizer& tok, const PrepareOptions& opt, CorpusReader& reader,
                      const std::unordered_set<std::uint64_t>& heldout, Splits& splits, PrepareProgress& progress,
                      PrepareSummary& sum) {
  struct Block {
    std::deque<std::string> texts;  // a deque: the pieces' views must not move
    std::vector<CorpusPiece> pieces;
    bool any = false;
    uint64_t file_bytes_done = 0;  // the reader's progress once it was read
  };
  auto read_block = [&reader, &opt] {
    Block b;
    b.any = reader.next_block(b.texts, b.pieces, opt.block_bytes);
    b.file_bytes_done = reader.file_bytes_done();
    return b;
  };
  // A block encoded and not yet written: each kept piece's size and whether it goes on the
  // document before it, and the ids (two of them, so one is written while the next encodes).
  struct Encoded {
    std::vector<std::pair<size_t, bool>> pieces;
    EncodedDocuments ids;
  };
  Encoded slots[2];
  Encoded* unwritten = nullptr;
  const std::vector<int> eot{tok.eot()};
  ShardSink* sink = nullptr;  // the current document's
  auto write = [&](const Encoded& e) {
    for (size_t k = 0; k < e.pieces.size(); ++k) {
      // llm.c: <|endoftext|> (the tokenizer's end of text) before every document
      if (!e.pieces[k].second || !sink) {
        bool is_val = false;
        sink = &splits.sink_for(sum.documents++, is_val);
        sum.val_documents += is_val;
        sink->append(eot);
      }
      sink->append(e.ids.of(k));
      sum.bytes += e.pieces[k].first;
    }
  };

  std::future<Block> ahead = std::async(std::launch::async, read_block);
  uint64_t bytes_before_block = 0;
  bool skipping = false;  // the current document is held out
  for (;;) {
    const Block block = ahead.get();  // a reader's Error surfaces here
    if (!block.any) break;
    ahead = std::async(std::launch::async, read_block);
    Encoded& e = unwritten == &slots[0] ? slots[1] : slots[0];
    e.pieces.clear();
    // A held-out document is known by its whole text (a topics task's documents are far shorter
    // than a block), so only a piece that starts a document is looked up; its parts follow it.
    std::vector<std::string_view> docs;
    uint64_t block_text = 0;
    for (const CorpusPiece& p : block.pieces) {
      if (!p.continues) skipping = held_out(heldout, p.text);
      if (skipping) {
        sum.excluded += !p.continues;
        continue;
      }
      e.pieces.emplace_back(p.text.size(), p.continues);
      docs.push_back(p.text);
      block_text += p.text.size();
    }
    // While the block encodes, its share of the files' bytes advances with the text encoded.
    const uint64_t block_file_bytes = block.file_bytes_done - bytes_before_block;
    encode_documents(
        tok, docs, opt.threads, e.ids, opt.parallel_split_bytes,
        [&](uint64_t done) {
          const double part = block_text ? double(done) / double(block_text) : 1.0;
          progress.update(bytes_before_block + static_cast<uint64_t>(part * double(block_file_bytes)),
                          sum.documents, splits.tokens());
        },
        [&] {
          if (unwritten) write(*unwritten);
        });
    unwritten = &e;
    bytes_before_block = block.file_bytes_done;
  }
  if (unwritten) write(*unwritten);
  progress.update(bytes_before_block, sum.documents, splits.tokens());
}

}  // namespace

PrepareSummary prepare_corpus(const Gpt2Tokenizer& tok, const PrepareOptions& opt) {
  const auto t0 = Clock::now();
  MPT_CHECK(!opt.out_dir.empty(), "prepare: no output folder given");
  MPT_CHECK(opt.shard_tokens >= 1 && opt.shard_tokens <= static_cast<uint64_t>(INT32_MAX),
            "prepare: --shard-tokens must be between 1 and " + std::to_string(INT32_MAX));
  MPT_CHECK(!opt.val_fraction || (*opt.val_fraction >= 0 && *opt.val_fraction < 1),
            "prepare: --val-fraction must be in [0, 1)");
  MPT_CHECK(opt.doc_delimiter.find('\n') == std::string::npos, "prepare: --doc-delimiter must be one line");

  const std::vector<TextFile> files = expand_inputs(opt.inputs, opt.excludes);
  CorpusReader reader(files, {opt.doc_delimiter, opt.text_field, opt.skip_bad_records}, opt.threads);
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
  remove_stale_staging(opt.out_dir, name);
  StagingDir staging{opt.out_dir + "/." + name + ".staging." + std::to_string(::getpid())};
  fs::remove_all(staging.path, ec);
  fs::create_directory(staging.path, ec);
  if (ec) throw Error("cannot create folder '" + staging.path + "': " + ec.message());

  PrepareSummary sum;
  sum.files = files.size();
  sum.threads = worker_threads(opt.threads);
  const std::unordered_set<std::uint64_t> heldout =
      opt.exclude_docs.empty() ? std::unordered_set<std::uint64_t>{} : read_heldout(opt.exclude_docs);
  Splits splits(staging.path, name, opt, tok.vocab_size());
  sum.first_shard_val = !opt.val_fraction;
  PrepareProgress progress(total_bytes, opt.progress);
  encode_and_write(tok, opt, reader, heldout, splits, progress, sum);
  progress.finish();
  sum.bad_records = reader.bad_records();
  if (sum.documents == 0)
    throw Error("the inputs hold no documents: " + std::to_string(files.size()) + " file(s) with " +
                (sum.excluded ? "every document held out (--exclude-docs)"
                              : "nothing but delimiter lines '" + opt.doc_delimiter + "' or bad records"));
  splits.finish();
  const auto shards = splits.shards();
  if (!opt.val_fraction && shards.size() < 2)
    throw Error("the corpus fills only the validation shard (" + with_commas(splits.tokens()) +
                " tokens, --shard-size " + with_commas(opt.shard_tokens) +
                "): nothing is left to train on; give a smaller --shard-size, or --val-fraction");

  // Move the complete set into place, then drop shards of an earlier run that the
  // new set did not overwrite (an earlier run with more shards).
  std::set<std::string> fresh;
  for (const auto& [n, tokens, is_val] : shards) {
    fs::rename(staging.path + "/" + n, opt.out_dir + "/" + n, ec);
    if (ec) throw Error("cannot move shard into '" + opt.out_dir + "/" + n + "': " + ec.message());
    fresh.insert(n);
    (is_val ? sum.val_shards : sum.train_shards).push_back(opt.out_dir + "/" + n);
    (is_val ? sum.val_tokens : sum.train_tokens) += tokens;
  }
  for (const auto& entry : fs::directory_iterator(opt.out_dir, ec)) {
    std::string file = entry.path().filename().string();
    if (is_shard_name(file, name) && !fresh.count(file)) fs::remove(entry.path(), ec);
  }
  fsync_dir(opt.out_dir);

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
         shards(s.val_shards) + (s.first_shard_val ? " (the first shard, as llm.c's fineweb.py)" : "") + "\n";
  out += std::string("  ") + ratio + " bytes per token (" + count(text_tokens, "token") + " of text + " +
         with_commas(s.documents) + " <|endoftext|>)\n";
  if (s.excluded) out += "  " + count(s.excluded, "document") + " held out (--exclude-docs)\n";
  if (s.bad_records) out += "  " + count(s.bad_records, "bad record") + " skipped (--skip-bad-records)\n";
  if (s.val_documents == 0)
    out +=
        "  note: no validation documents (raise --val-fraction, or cut files into documents with "
        "--doc-delimiter)\n";
  return out;
}

}  // namespace mptrain
