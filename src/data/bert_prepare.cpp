// BERT pretraining data: sentence splitting, create_pretraining_data's instance loop,
// the train/val split, vocabulary training when none is given, and the files.
#include "data/bert_prepare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <unordered_set>

#include "core/error.h"
#include "core/rng.h"
#include "data/prepare.h"
#include "data/topic_task.h"
#include "data/wordpiece_trainer.h"
#include "io/fileutil.h"

namespace fs = std::filesystem;

namespace mptrain {

namespace {

// The preparation's random numbers: one counter-based sequence (core/rng.h's hash),
// so a run is reproducible from its seed on any machine and standard library.
struct PrepRng {
  uint64_t seed;
  uint64_t& counter;
  uint64_t bits() { return mix64(mix64(seed ^ 0x70726570ull) + counter++); }
  double random() { return static_cast<double>(bits() >> 11) * (1.0 / 9007199254740992.0); }
  // Python's random.randint: uniform in [lo, hi].
  int64_t randint(int64_t lo, int64_t hi) {
    const uint64_t n = static_cast<uint64_t>(hi - lo + 1);
    return lo + static_cast<int64_t>((static_cast<unsigned __int128>(bits()) * n) >> 64);
  }
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

// Words after which a period does not end a sentence (compared lower-cased).
bool is_abbreviation(std::string_view word) {
  static const char* const kAbbrev[] = {"mr",  "mrs", "ms",  "dr",   "st",  "jr",     "sr",  "vs",
                                        "etc", "e.g", "i.e", "prof", "mt",  "no",     "vol", "fig",
                                        "inc", "ltd", "co",  "gen",  "col", "lt",     "sgt", "capt",
                                        "rev", "gov", "sen", "rep",  "ave", "approx", "cf"};
  std::string w;
  for (char c : word) w.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
  for (const char* a : kAbbrev)
    if (w == a) return true;
  return w.size() == 1 && w[0] >= 'a' && w[0] <= 'z';  // an initial: "J. R. R. Tolkien"
}

// Splits one paragraph (lines already joined by single spaces) into sentences.
void split_paragraph(const std::string& p, std::vector<std::string>& out) {
  size_t start = 0, i = 0;
  const size_t n = p.size();
  auto emit = [&](size_t end) {
    size_t a = start, b = end;
    while (a < b && is_space(p[a])) ++a;
    while (b > a && is_space(p[b - 1])) --b;
    if (b > a) out.push_back(p.substr(a, b - a));
  };
  while (i < n) {
    const char c = p[i];
    if (c != '.' && c != '!' && c != '?') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && (p[j] == '.' || p[j] == '!' || p[j] == '?')) ++j;
    while (j < n && (p[j] == '"' || p[j] == '\'' || p[j] == ')' || p[j] == ']')) ++j;
    if (j >= n || !is_space(p[j])) {  // "3.14", "e.g.,", end of text: no cut here
      i = j;
      continue;
    }
    size_t k = j;
    while (k < n && is_space(p[k])) ++k;
    const bool lower_next = k < n && p[k] >= 'a' && p[k] <= 'z';
    bool abbreviation = false;
    if (p[i] == '.' && j == i + 1) {  // a single "." right after a word
      size_t w = i;
      while (w > start && !is_space(p[w - 1])) --w;
      std::string_view word(p.data() + w, i - w);
      while (!word.empty() && (word.front() == '(' || word.front() == '"' || word.front() == '\''))
        word.remove_prefix(1);
      abbreviation = is_abbreviation(word);
    }
    if (!lower_next && !abbreviation && k < n) {
      emit(j);
      start = k;
    }
    i = k;
  }
  emit(n);
}

std::string with_commas(uint64_t v) {
  const std::string d = std::to_string(v);
  std::string out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(d[i]);
  }
  return out;
}

bool is_val_document(size_t i, double f) {
  return std::floor(static_cast<double>(i + 1) * f) > std::floor(static_cast<double>(i) * f);
}

using Document = std::vector<std::vector<uint16_t>>;  // sentences of ids

// truncate_seq_pair: trims the longer segment, from its front or back at random.
void truncate_seq_pair(std::vector<uint16_t>& a, std::vector<uint16_t>& b, size_t max_tokens, PrepRng& rng) {
  while (a.size() + b.size() > max_tokens) {
    auto& t = a.size() > b.size() ? a : b;
    if (rng.random() < 0.5)
      t.erase(t.begin());
    else
      t.pop_back();
  }
}

}  // namespace

std::vector<std::string> split_sentences(std::string_view document) {
  std::vector<std::string> out;
  std::string para;
  auto flush = [&]() {
    if (!para.empty()) split_paragraph(para, out);
    para.clear();
  };
  size_t pos = 0;
  while (pos <= document.size()) {
    size_t nl = document.find('\n', pos);
    if (nl == std::string_view::npos) nl = document.size();
    std::string_view line = document.substr(pos, nl - pos);
    pos = nl + 1;
    size_t a = 0, b = line.size();
    while (a < b && is_space(line[a])) ++a;
    while (b > a && is_space(line[b - 1])) --b;
    line = line.substr(a, b - a);
    if (line.empty()) {  // a blank line ends a paragraph
      flush();
      continue;
    }
    if (line.starts_with("--") || line.starts_with("\xE2\x80\x94")) flush();  // "-- Author", "— Author"
    if (!para.empty()) para.push_back(' ');
    for (size_t k = 0; k < line.size(); ++k) {  // runs of spaces and tabs become one space
      if (is_space(line[k])) {
        if (para.back() != ' ') para.push_back(' ');
      } else {
        para.push_back(line[k]);
      }
    }
  }
  flush();
  return out;
}

void create_bert_instances(const std::vector<Document>& documents, size_t doc_index, int max_seq_len,
                           double short_seq_prob, NspRule nsp, const BertSpecialIds& sp, uint64_t seed,
                           uint64_t& rng_state, std::vector<BertInstance>& out) {
  PrepRng rng{seed, rng_state};
  const Document& document = documents[doc_index];
  const int64_t max_num_tokens = max_seq_len - 3;  // [CLS] A [SEP] B [SEP]
  // Usually fill the whole budget; sometimes (short_seq_prob) a shorter target, to
  // reduce the mismatch between pretraining and fine-tuning on short inputs.
  int64_t target_seq_length = max_num_tokens;
  if (rng.random() < short_seq_prob) target_seq_length = rng.randint(2, max_num_tokens);

  std::vector<const std::vector<uint16_t>*> chunk;
  int64_t chunk_length = 0;
  int64_t i = 0;
  const int64_t n = static_cast<int64_t>(document.size());
  while (i < n) {
    chunk.push_back(&document[static_cast<size_t>(i)]);
    chunk_length += static_cast<int64_t>(document[static_cast<size_t>(i)].size());
    if (i == n - 1 || chunk_length >= target_seq_length) {
      const bool one_segment = chunk.size() == 1;
      if (!(one_segment && nsp == NspRule::kBalanced)) {
        // A takes the first a_end segments of the chunk.
        const int64_t a_end = chunk.size() >= 2 ? rng.randint(1, static_cast<int64_t>(chunk.size()) - 1) : 1;
        std::vector<uint16_t> a, b;
        for (int64_t k = 0; k < a_end; ++k) a.insert(a.end(), chunk[k]->begin(), chunk[k]->end());
        bool random_next = false;
        if (one_segment || rng.random() < 0.5) {
          random_next = true;
          const int64_t target_b_length = target_seq_length - static_cast<int64_t>(a.size());
          // Ten tries at a document other than this one (a corpus of one document
          // falls back to itself, as the original does).
          size_t r = doc_index;
          for (int tries = 0; tries < 10; ++tries) {
            r = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(documents.size()) - 1));
            if (r != doc_index) break;
          }
          const Document& other = documents[r];
          const int64_t start = rng.randint(0, static_cast<int64_t>(other.size()) - 1);
          for (size_t j = static_cast<size_t>(start); j < other.size(); ++j) {
            b.insert(b.end(), other[j].begin(), other[j].end());
            if (static_cast<int64_t>(b.size()) >= target_b_length) break;
          }
          // The segments not used as A go back to the document for the next chunk.
          i -= static_cast<int64_t>(chunk.size()) - a_end;
        } else {
          for (size_t k = static_cast<size_t>(a_end); k < chunk.size(); ++k)
            b.insert(b.end(), chunk[k]->begin(), chunk[k]->end());
        }
        truncate_seq_pair(a, b, static_cast<size_t>(max_num_tokens), rng);
        if (!a.empty() && !b.empty()) {
          BertInstance inst;
          inst.tokens.reserve(a.size() + b.size() + 3);
          inst.tokens.push_back(static_cast<uint16_t>(sp.cls));
          inst.tokens.insert(inst.tokens.end(), a.begin(), a.end());
          inst.tokens.push_back(static_cast<uint16_t>(sp.sep));
          inst.tokens.insert(inst.tokens.end(), b.begin(), b.end());
          inst.tokens.push_back(static_cast<uint16_t>(sp.sep));
          inst.nsp_label = random_next ? 1 : 0;
          out.push_back(std::move(inst));
        }
      }
      chunk.clear();
      chunk_length = 0;
    }
    ++i;
  }
}

BertPrepareSummary prepare_bert(const BertPrepareOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds_since = [](auto t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  MPT_CHECK(!opt.out_dir.empty(), "prepare: no output folder given");
  MPT_CHECK(opt.max_seq_len >= 5 && opt.max_seq_len <= 65535,
            "prepare --task bert: --max-seq-len must be between 5 and 65535 ([CLS] A [SEP] B [SEP] needs 5)");
  MPT_CHECK(opt.short_seq_prob >= 0 && opt.short_seq_prob <= 1,
            "prepare: --short-seq-prob must be in [0, 1]");
  MPT_CHECK(opt.dupe_factor >= 1, "prepare: --dupe-factor must be at least 1");
  MPT_CHECK(opt.val_fraction >= 0 && opt.val_fraction < 1, "prepare: --val-fraction must be in [0, 1)");

  BertPrepareSummary sum;
  const std::vector<TextFile> files = expand_inputs(opt.inputs, opt.excludes);
  sum.files = files.size();
  std::vector<std::string> texts;
  std::vector<std::string_view> train_docs, val_docs;
  texts.reserve(files.size());
  for (const auto& f : files) texts.push_back(read_text_file(f.path));
  const std::unordered_set<std::uint64_t> heldout =
      opt.exclude_docs.empty() ? std::unordered_set<std::uint64_t>{} : read_heldout(opt.exclude_docs);
  for (const auto& t : texts) {
    for (std::string_view d : split_documents(t, opt.doc_delimiter)) {
      if (held_out(heldout, d)) {
        ++sum.excluded;
        continue;
      }
      const bool val = is_val_document(sum.documents++, opt.val_fraction);
      (val ? val_docs : train_docs).push_back(d);
      sum.val_documents += val;
      sum.bytes += d.size();
    }
  }
  if (sum.documents == 0) throw Error("the inputs hold no documents");
  if (train_docs.empty()) throw Error("prepare --task bert: no training documents (lower --val-fraction)");

  std::string name = opt.name;
  if (name.empty()) {
    fs::path p = fs::absolute(opt.out_dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    name = p.filename().string();
  }
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec) throw Error("cannot create output folder '" + opt.out_dir + "': " + ec.message());

  BasicTokenizerOptions basic;
  basic.lower_case = opt.lower_case;
  WordpieceVocab vocab;
  if (opt.vocab_path.empty()) {
    WordpieceTrainOptions topt;
    topt.vocab_size = opt.vocab_size;
    topt.basic = basic;
    WordpieceTrainSummary ts;
    vocab = train_wordpiece(train_docs, topt, &ts);
    sum.vocab_trained = true;
    sum.vocab_seconds = ts.seconds;
  } else {
    vocab = WordpieceVocab::load(opt.vocab_path);
  }
  if (vocab.size() > 65536)
    throw Error("prepare --task bert: the vocabulary has " + std::to_string(vocab.size()) +
                " tokens; instance files store uint16 ids (at most 65536)");
  sum.vocab_size = vocab.size();
  const WordpieceTokenizer tok(vocab, basic);

  // Documents -> sentences -> ids; sentences without a token and documents without a
  // sentence are dropped (create_pretraining_data drops empty lines and documents).
  auto tokenize_docs = [&](const std::vector<std::string_view>& docs) {
    std::vector<Document> out;
    std::vector<int> ids;
    for (std::string_view d : docs) {
      Document doc;
      for (const auto& s : split_sentences(d)) {
        ids.clear();
        tok.encode(s, ids);
        if (ids.empty()) continue;
        doc.emplace_back(ids.begin(), ids.end());
        ++sum.sentences;
      }
      if (!doc.empty()) out.push_back(std::move(doc));
    }
    return out;
  };
  // As the original: documents shuffled once, then dupe_factor passes over all of
  // them, then the instances shuffled.
  auto make = [&](const std::vector<std::string_view>& docs, int dupe, uint64_t stream) {
    std::vector<Document> documents = tokenize_docs(docs);
    std::vector<BertInstance> inst;
    if (documents.empty()) return inst;
    uint64_t state = 0;
    PrepRng rng{opt.seed ^ stream, state};
    for (size_t k = documents.size(); k > 1; --k)
      std::swap(documents[k - 1], documents[rng.randint(0, k - 1)]);
    for (int d = 0; d < dupe; ++d)
      for (size_t k = 0; k < documents.size(); ++k)
        create_bert_instances(documents, k, opt.max_seq_len, opt.short_seq_prob, opt.nsp, vocab.special(),
                              opt.seed ^ stream, state, inst);
    for (size_t k = inst.size(); k > 1; --k) std::swap(inst[k - 1], inst[rng.randint(0, k - 1)]);
    return inst;
  };
  const std::vector<BertInstance> train = make(train_docs, opt.dupe_factor, 0x747261696eull);
  const std::vector<BertInstance> val = make(val_docs, 1, 0x76616cull);
  if (train.empty()) throw Error("prepare --task bert: the training documents gave no instances");

  auto count = [](const std::vector<BertInstance>& v, size_t& not_next, uint64_t& tokens) {
    for (const auto& x : v) {
      not_next += x.nsp_label;
      tokens += x.tokens.size();
    }
  };
  count(train, sum.train_not_next, sum.train_tokens);
  count(val, sum.val_not_next, sum.val_tokens);
  sum.train_instances = train.size();
  sum.val_instances = val.size();

  BertInstanceWriteInfo info;
  info.max_seq_len = static_cast<uint32_t>(opt.max_seq_len);
  info.dupe_factor = static_cast<uint32_t>(opt.dupe_factor);
  info.num_documents = static_cast<uint32_t>(train_docs.size());
  info.seed = opt.seed;
  info.lower_case = opt.lower_case;
  sum.vocab_path = opt.out_dir + "/" + name + "_vocab.txt";
  write_file_atomic(sum.vocab_path, vocab.to_text());
  sum.train_path = opt.out_dir + "/" + name + "_train.bert";
  write_bert_instances(sum.train_path, vocab, train, info);
  sum.val_path = opt.out_dir + "/" + name + "_val.bert";
  if (!val.empty()) {
    info.dupe_factor = 1;
    info.num_documents = static_cast<uint32_t>(val_docs.size());
    write_bert_instances(sum.val_path, vocab, val, info);
  } else {
    fs::remove(sum.val_path, ec);  // a stale val file from an earlier run would not match
    sum.val_path.clear();
  }
  fsync_dir(opt.out_dir);
  sum.seconds = seconds_since(t0);
  return sum;
}

std::string describe(const BertPrepareSummary& s) {
  char buf[256];
  std::string out = "prepared BERT instances from " + with_commas(s.documents) + " documents (" +
                    with_commas(s.sentences) + " sentences) in " + with_commas(s.files) + " file(s)";
  std::snprintf(buf, sizeof(buf), ", %.2f MB, in %.1f s\n", s.bytes / 1e6, s.seconds);
  out += buf;
  if (s.excluded) out += "  " + with_commas(s.excluded) + " documents held out (--exclude-docs)\n";
  auto split = [&](const char* what, size_t n, size_t not_next, uint64_t tokens, const std::string& path) {
    std::snprintf(buf, sizeof(buf), "  %s %s instances, %s tokens (%.1f per instance), NotNext %.1f%%: %s\n",
                  what, with_commas(n).c_str(), with_commas(tokens).c_str(), n ? double(tokens) / n : 0.0,
                  n ? 100.0 * not_next / n : 0.0, path.c_str());
    out += buf;
  };
  split("train:", s.train_instances, s.train_not_next, s.train_tokens, s.train_path);
  if (!s.val_path.empty()) split("val:  ", s.val_instances, s.val_not_next, s.val_tokens, s.val_path);
  std::snprintf(
      buf, sizeof(buf), "  vocabulary: %d tokens%s: %s\n", s.vocab_size,
      s.vocab_trained ? (" (trained in " + std::to_string(s.vocab_seconds).substr(0, 4) + " s)").c_str() : "",
      s.vocab_path.c_str());
  out += buf;
  return out;
}

}  // namespace mptrain
