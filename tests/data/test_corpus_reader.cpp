// Reading a corpus (data/byte_stream.h, data/corpus_reader.h): compressed streams against what the
// zstd, gzip and xz tools write (concatenated frames and members too), a truncated or corrupt stream
// as one Error with the file and the offset, a record's text at a field (nested, escaped, missing,
// of the wrong type, not JSON), the documents of text and JSON lines files read in blocks far
// smaller than them (the same documents as read whole, bad records named by file and line, or
// counted), and Parquet refused before anything is read.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "core/error.h"
#include "data/byte_stream.h"
#include "data/corpus_reader.h"
#include "data/data_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using data_test::compress;
using data_test::error_of;
using data_test::kCompressors;
using data_test::TempDir;

// Text with long runs (it compresses) and bytes of every value (it is not only ASCII).
std::string payload(size_t bytes, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s;
  const std::string words[] = {"alpha ", "beta ", "gamma\n", "delta, ", "\xC3\xA9t\xC3\xA9 ", "42 "};
  while (s.size() < bytes) {
    if (rng() % 50 == 0)
      s.push_back(static_cast<char>(rng() % 256));
    else
      s += words[rng() % 6];
  }
  s.resize(bytes);
  return s;
}

std::string read_all(const std::string& path, size_t chunk) {
  auto in = open_byte_stream(path);
  std::string out, buf(chunk, '\0');
  while (size_t n = in->read(buf.data(), buf.size())) out.append(buf.data(), n);
  EXPECT_EQ(in->file_bytes_read(), fs::file_size(path)) << path;
  return out;
}

TEST(ByteStream, CompressionByName) {
  EXPECT_EQ(compression_of("a/b.jsonl.zst"), Compression::Zstd);
  EXPECT_EQ(compression_of("b.zstd"), Compression::Zstd);
  EXPECT_EQ(compression_of("b.json.gz"), Compression::Gzip);
  EXPECT_EQ(compression_of("b.txt.xz"), Compression::Xz);
  EXPECT_EQ(compression_of("b.gz.txt"), Compression::None);
  EXPECT_EQ(corpus_format("x/train.jsonl.zst"), CorpusFormat::JsonLines);
  EXPECT_EQ(corpus_format("x/train.json.gz"), CorpusFormat::JsonLines);
  EXPECT_EQ(corpus_format("x/train-00000.parquet"), CorpusFormat::Parquet);
  EXPECT_EQ(corpus_format("x/book.txt.xz"), CorpusFormat::Text);
  EXPECT_EQ(corpus_format("x/jsonl"), CorpusFormat::Text);
}

TEST(ByteStream, DecompressesWhatTheToolsWriteConcatenatedToo) {
  std::string why;
  if (!data_test::have_compressors(why)) GTEST_SKIP() << why;
  TempDir tmp;
  const std::string a = payload(3 << 20, 1), b = payload(100'000, 2);
  data_test::write_bytes(tmp / "a", a);
  data_test::write_bytes(tmp / "b", b);
  data_test::write_bytes(tmp / "empty", "");
  EXPECT_EQ(read_all(tmp / "a", 4096), a);
  for (const auto& t : kCompressors) {
    SCOPED_TRACE(t.suffix);
    const std::string ca = compress(tmp / "a", t), cb = compress(tmp / "b", t);
    EXPECT_EQ(read_all(ca, 1000), a);
    EXPECT_EQ(read_all(ca, 5 << 20), a);
    // Frames (zstd), members (gzip) and streams (xz) one after another are one content, as the
    // tools themselves read them.
    const std::string both = tmp / (std::string("both") + t.suffix);
    ASSERT_EQ(data_test::run("cat " + ca + " " + cb + " > " + both).status, 0);
    EXPECT_EQ(read_all(both, 65536), a + b);
    EXPECT_EQ(read_all(compress(tmp / "empty", t), 100), "");
  }
}

TEST(ByteStream, TruncatedOrCorruptIsOneErrorWithTheFileAndOffset) {
  std::string why;
  if (!data_test::have_compressors(why)) GTEST_SKIP() << why;
  TempDir tmp;
  data_test::write_bytes(tmp / "a", payload(2 << 20, 3));
  for (const auto& t : kCompressors) {
    SCOPED_TRACE(t.suffix);
    const std::string whole = compress(tmp / "a", t);
    const std::string bytes = read_text_file(whole);
    const std::string cut = tmp / (std::string("cut") + t.suffix);
    data_test::write_bytes(cut, bytes.substr(0, bytes.size() / 2));
    std::string e = error_of([&] { read_all(cut, 1 << 16); });
    EXPECT_NE(e.find("'" + cut + "': "), std::string::npos) << e;
    EXPECT_NE(e.find("stream truncated"), std::string::npos) << e;
    EXPECT_NE(e.find("detected at byte " + std::to_string(bytes.size() / 2) + " of the file"), std::string::npos)
        << e;

    std::string broken = bytes;
    for (size_t k = 0; k < 64; ++k) broken[bytes.size() / 3 + k] ^= 0x5A;
    const std::string bad = tmp / (std::string("bad") + t.suffix);
    data_test::write_bytes(bad, broken);
    e = error_of([&] { read_all(bad, 1 << 16); });
    EXPECT_NE(e.find("'" + bad + "': "), std::string::npos) << e;
    EXPECT_NE(e.find("stream corrupt ("), std::string::npos) << e;
    // Found where the damage is or after it, never before it.
    const size_t at = e.find("detected at byte ");
    ASSERT_NE(at, std::string::npos) << e;
    EXPECT_GE(std::stoull(e.substr(at + 17)), bytes.size() / 3) << e;
  }
  EXPECT_NE(error_of([&] { open_byte_stream(tmp / "missing.gz"); }).find("cannot open '" + tmp / "missing.gz"),
            std::string::npos);
}

TEST(RecordText, FieldsEscapesAndWhatIsWrong) {
  const std::vector<std::string> text{"text"}, nested{"meta", "body"};
  EXPECT_EQ(record_text(R"({"id": 3, "text": "a\nb \"q\" \u00e9 \ud83d\ude00 \\"})", text),
            "a\nb \"q\" \xC3\xA9 \xF0\x9F\x98\x80 \\");
  EXPECT_EQ(record_text(R"({"text": ""})", text), "");
  EXPECT_EQ(record_text(R"({"meta": {"body": "deep", "text": 1}, "text": "top"})", nested), "deep");
  EXPECT_EQ(record_text("{\"text\": \"raw \xE2\x80\x94 utf-8\"}\r", text), "raw \xE2\x80\x94 utf-8");
}

TEST(RecordText, BadRecordsSayWhatIsWrong) {
  const std::vector<std::string> text{"text"}, nested{"meta", "body"};
  auto msg = [&](std::string_view line, const std::vector<std::string>& field) {
    return error_of([&] { record_text(line, field); });
  };
  EXPECT_NE(msg(R"({"text": 5})", text).find("field 'text' is a number, not a string"), std::string::npos);
  EXPECT_NE(msg(R"({"text": null})", text).find("field 'text' is null, not a string"), std::string::npos);
  EXPECT_NE(msg(R"({"body": "x"})", text).find("the record has no field 'text'"), std::string::npos);
  EXPECT_NE(msg(R"({"meta": "x"})", nested).find("no field 'meta.body' (a string where an object"),
            std::string::npos);
  EXPECT_NE(msg(R"(["text"])", text).find("an array where an object was expected"), std::string::npos);
  EXPECT_NE(msg(R"({"text": "unterminated})", text).find("not a JSON record ("), std::string::npos);
  EXPECT_NE(msg("{\"text\": \"bad \xFF utf-8\"}", text).find("not a JSON record ("), std::string::npos);
  EXPECT_NE(msg(R"({"text": "a"} trailing)", text).find("not a JSON record ("), std::string::npos);
}

std::vector<std::string> documents_of(const std::vector<std::string>& paths, CorpusReadOptions opt,
                                      uint64_t block_bytes, int threads, size_t* bad = nullptr) {
  std::vector<TextFile> files;
  for (const auto& p : paths) files.push_back({p, fs::file_size(p)});
  CorpusReader reader(files, std::move(opt), threads);
  std::vector<std::string> docs;
  for (;;) {
    std::deque<std::string> storage;
    std::vector<CorpusPiece> pieces;
    if (!reader.next_block(storage, pieces, block_bytes)) break;
    for (const CorpusPiece& p : pieces) {
      if (p.continues) {
        EXPECT_FALSE(docs.empty());
        docs.back() += p.text;
      } else {
        docs.emplace_back(p.text);
      }
    }
  }
  EXPECT_EQ(reader.file_bytes_done(), [&] {
    uint64_t n = 0;
    for (const auto& f : files) n += f.bytes;
    return n;
  }());
  if (bad) *bad = reader.bad_records();
  return docs;
}

TEST(CorpusReader, TextInSmallBlocksGivesTheDocumentsOfTheWhole) {
  TempDir tmp;
  std::string text;
  for (int i = 0; i < 400; ++i) {
    text += "Document " + std::to_string(i) + " says hello.\n";
    if (i % 7 == 0) text += "A second line, longer than the first one, to vary the sizes.\n";
    if (i % 50 == 0)  // a document far longer than a block: given out in parts at safe cuts
      for (int k = 0; k < 60; ++k) text += "line " + std::to_string(k) + " of a long one\n";
    text += "%\n";
  }
  data_test::write_bytes(tmp / "docs.txt", text);
  const auto whole = split_documents(text, "%");
  for (uint64_t block : {uint64_t(64), uint64_t(1000), uint64_t(1) << 26}) {
    SCOPED_TRACE(block);
    const auto docs = documents_of({tmp / "docs.txt"}, {.doc_delimiter = "%"}, block, 1);
    ASSERT_EQ(docs.size(), whole.size());
    for (size_t i = 0; i < docs.size(); ++i) EXPECT_EQ(docs[i], whole[i]) << i;
  }
  // One document a file, a file longer than a block: the file whole.
  const auto one = documents_of({tmp / "docs.txt"}, {}, 100, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], text);
}

TEST(CorpusReader, JsonLinesInSmallBlocksAndCompressed) {
  std::string why;
  if (!data_test::have_compressors(why)) GTEST_SKIP() << why;
  TempDir tmp;
  std::string lines;
  std::vector<std::string> want;
  for (int i = 0; i < 300; ++i) {
    const std::string t = "record " + std::to_string(i) + (i % 3 ? "\nwith a second line" : "");
    want.push_back(t);
    lines += R"({"id": )" + std::to_string(i) + R"(, "text": ")" + (i % 3 ? "record " + std::to_string(i) +
             "\\nwith a second line" : t) + "\"}\n";
    if (i % 100 == 0) lines += "\n";  // blank lines hold no record
  }
  lines += R"({"text": ""})";  // the last line without its newline; an empty text is still a record
  want.emplace_back("");
  data_test::write_bytes(tmp / "r.jsonl", lines);
  for (uint64_t block : {uint64_t(1), uint64_t(500), uint64_t(1) << 26})
    for (int threads : {1, 2}) EXPECT_EQ(documents_of({tmp / "r.jsonl"}, {}, block, threads), want);
  for (const auto& t : kCompressors) {
    SCOPED_TRACE(t.suffix);
    EXPECT_EQ(documents_of({compress(tmp / "r.jsonl", t)}, {}, 777, 2), want);
  }
  // Files of both kinds in one run, in the order given.
  data_test::write_bytes(tmp / "t.txt", "plain one\n%\nplain two\n");
  auto mixed = documents_of({tmp / "t.txt", tmp / "r.jsonl"}, {.doc_delimiter = "%"}, 300, 2);
  ASSERT_EQ(mixed.size(), want.size() + 2);
  EXPECT_EQ(mixed[0], "plain one\n");
  EXPECT_EQ(mixed[1], "plain two\n");
  EXPECT_EQ(mixed.back(), "");
}

TEST(CorpusReader, BadRecordIsNamedByFileAndLineOrCounted) {
  TempDir tmp;
  std::string lines;
  for (int i = 1; i <= 200; ++i) {
    if (i == 150)
      lines += "{\"text\": \"cut off\n";
    else if (i == 170)
      lines += "{\"content\": \"no text field\"}\n";
    else
      lines += "{\"text\": \"line " + std::to_string(i) + "\"}\n";
  }
  data_test::write_bytes(tmp / "bad.jsonl", lines);
  for (uint64_t block : {uint64_t(100), uint64_t(1) << 20}) {
    const std::string e = error_of([&] { documents_of({tmp / "bad.jsonl"}, {}, block, 2); });
    EXPECT_NE(e.find("'" + tmp / "bad.jsonl" + "' line 150: not a JSON record ("), std::string::npos) << e;
    EXPECT_NE(e.find("--skip-bad-records"), std::string::npos) << e;
  }
  size_t bad = 0;
  const auto docs = documents_of({tmp / "bad.jsonl"}, {.doc_delimiter = "", .skip_bad_records = true}, 100, 2, &bad);
  EXPECT_EQ(bad, 2u);
  ASSERT_EQ(docs.size(), 198u);
  EXPECT_EQ(docs[148], "line 149");
  EXPECT_EQ(docs[149], "line 151");
  // The field named by --text-field.
  const auto content = documents_of({tmp / "bad.jsonl"}, {.doc_delimiter = "", .text_field = "content", .skip_bad_records = true},
                                    1 << 20, 1, &bad);
  EXPECT_EQ(content, std::vector<std::string>{"no text field"});
  EXPECT_EQ(bad, 199u);
  EXPECT_NE(error_of([&] { documents_of({tmp / "bad.jsonl"}, {.doc_delimiter = "", .text_field = "meta..x"}, 100, 1); })
                .find("--text-field 'meta..x'"),
            std::string::npos);
}

TEST(CorpusReader, ParquetIsRefusedBeforeAnythingIsRead) {
  TempDir tmp;
  data_test::write_bytes(tmp / "a.jsonl", "{\"text\": \"x\"}\n");
  data_test::write_bytes(tmp / "train-00000-of-00001.parquet", "PAR1");
  const std::string e = error_of([&] {
    CorpusReader({{tmp / "a.jsonl", 14}, {tmp / "train-00000-of-00001.parquet", 4}}, {}, 1);
  });
  EXPECT_NE(e.find("'" + tmp / "train-00000-of-00001.parquet" + "' is Parquet"), std::string::npos) << e;
  EXPECT_NE(e.find("docs/DATA.md"), std::string::npos) << e;
}

}  // namespace
}  // namespace mptrain
