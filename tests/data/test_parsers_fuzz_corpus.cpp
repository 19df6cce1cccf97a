// The data parsers on raw bytes (the fuzz targets' entry points): token-shard headers and GPT-2
// vocabularies (encoder.json NUL vocab.bpe), BERT vocab.txt and BERT instance files, held to
// their seed corpora in fuzz/corpus/; and the regression tests of what fuzzing and the
// size audit found in them.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/fuzz_corpus.h"
#include "common/test_util.h"
#include "core/error.h"
#include "../fuzz/corpus_records_input.h"
#include "data/bert_instances.h"
#include "data/gpt2_tokenizer.h"
#include "data/shard.h"
#include "data/wordpiece.h"

namespace mptrain {
namespace {

size_t shard_tokens(const std::string& bytes) {
  return parse_shard_header({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, "test")
      .num_tokens;
}

Gpt2Tokenizer vocab(const std::string& bytes) {
  const size_t nul = bytes.find('\0');
  return Gpt2Tokenizer::parse(bytes.substr(0, nul), nul == std::string::npos ? "" : bytes.substr(nul + 1),
                              "encoder.json", "vocab.bpe");
}

TEST(ShardBytes, SeedCorpus) {
  testing::check_fuzz_corpus("shard", [](const std::string& b) { shard_tokens(b); });
}

TEST(ShardBytes, CountMustMatchTheSize) {
  int32_t header[kShardHeaderInts] = {kShardMagic, kShardVersion, 3};
  std::string bytes(reinterpret_cast<const char*>(header), sizeof(header));
  bytes += std::string(6, '\1');
  EXPECT_EQ(shard_tokens(bytes), 3u);
  header[2] = INT32_MAX;  // claims 4 GB of tokens in a 1 KB file: refused from the header alone
  std::memcpy(bytes.data(), header, sizeof(header));
  EXPECT_THROW(shard_tokens(bytes), Error);
  // The wide format (uint32 ids): 6 bytes are one and a half tokens, 12 bytes three.
  header[0] = kWideShardMagic;
  header[1] = kWideShardVersion;
  header[2] = 3;
  std::memcpy(bytes.data(), header, sizeof(header));
  EXPECT_THROW(shard_tokens(bytes), Error);
  EXPECT_EQ(shard_tokens(bytes + std::string(6, '\1')), 3u);
}

TEST(Gpt2VocabBytes, SeedCorpus) {
  testing::check_fuzz_corpus("gpt2_vocab", [](const std::string& b) {
    const Gpt2Tokenizer tok = vocab(b);
    const std::string text = "hello world 12  <|endoftext|>";
    EXPECT_EQ(tok.decode(tok.encode(text, SpecialTokens::kAllowSpecial)), text);
  });
}

TEST(WordpieceVocabBytes, SeedCorpus) {
  testing::check_fuzz_corpus("wordpiece_vocab", [](const std::string& b) {
    WordpieceTokenizer tok(WordpieceVocab::parse(b, "vocab.txt"));
    EXPECT_EQ(tok.decode(tok.encode("the cats sat")), "the cats sat");
  });
}

BertInstanceSections bert_instances(const std::string& b, std::vector<uint64_t>& aligned) {
  aligned.assign((b.size() + 7) / 8, 0);  // the reader needs 8-byte alignment, as a mapping has
  if (!b.empty()) std::memcpy(aligned.data(), b.data(), b.size());
  return parse_bert_instances({reinterpret_cast<const std::byte*>(aligned.data()), b.size()}, "test.bin");
}

TEST(BertInstancesBytes, SeedCorpus) {
  testing::check_fuzz_corpus("bert_instances", [](const std::string& b) {
    std::vector<uint64_t> aligned;
    const BertInstanceSections s = bert_instances(b, aligned);
    EXPECT_EQ(s.offsets[s.header.num_instances], s.header.num_tokens);
  });
}

// max_seq_len sizes the loader's batch buffers (B x max_seq_len, before any instance is read):
// a header claiming 2^31 - 1 (or 2^32 - 1, negative as the int the loader takes) over two short
// instances was accepted and sent `tokenizer show-instances` to allocate gigabytes.
TEST(BertInstancesBytes, MaxSeqLenIsBoundedBeforeAnythingIsSized) {
  std::string valid;
  for (const auto& [name, bytes] : testing::fuzz_corpus("bert_instances"))
    if (name == "valid") valid = bytes;
  ASSERT_FALSE(valid.empty());
  std::vector<uint64_t> aligned;
  const size_t at = offsetof(BertInstanceHeader, max_seq_len);
  for (uint32_t claimed : {65535u, 65536u, 0x7fffffffu, 0xffffffffu}) {
    SCOPED_TRACE(claimed);
    std::string b = valid;
    std::memcpy(b.data() + at, &claimed, sizeof(claimed));
    if (claimed <= 65535) {
      EXPECT_EQ(bert_instances(b, aligned).header.max_seq_len, claimed);
    } else {
      try {
        bert_instances(b, aligned);
        ADD_FAILURE() << "accepted";
      } catch (const Error& e) {
        EXPECT_NE(
            std::string(e.what()).find("max_seq_len " + std::to_string(claimed) + " is outside 5..65535"),
            std::string::npos)
            << e.what();
      }
    }
  }
  // The command that sized its batch from it now stops with one line.
  testing::TempDir dir;
  std::string b = valid;
  const uint32_t huge = 0x7fffffffu;
  std::memcpy(b.data() + at, &huge, sizeof(huge));
  const std::string path = dir.path() + "/huge.bert";
  std::ofstream(path, std::ios::binary) << b;
  testing::expect_clear_error(testing::run_mptrain("tokenizer show-instances " + path),
                              "is outside 5..65535");
}

// JSON lines and text files, plain or compressed, read in blocks (fuzz/corpus_records_input.h).
TEST(CorpusRecordsBytes, SeedCorpus) {
  const int valid = testing::check_fuzz_corpus("corpus_records", [](const std::string& b) {
    if (b.empty()) throw Error("empty input");
    fuzzing::read_corpus_input(static_cast<uint8_t>(b[0]), std::string_view(b).substr(1));
  });
  EXPECT_GE(valid, 7);
}

TEST(CorpusRecordsBytes, SeedsReadAsTheyShould) {
  const std::string dir = testing::source_dir() + "/fuzz/corpus/corpus_records/";
  auto docs = [&](const std::string& name, size_t* bad = nullptr) {
    std::ifstream f(dir + name, std::ios::binary);
    const std::string b((std::istreambuf_iterator<char>(f)), {});
    return fuzzing::read_corpus_input(static_cast<uint8_t>(b.at(0)), std::string_view(b).substr(1), bad);
  };
  const std::vector<std::string> records = {"First record.\nIt's two lines.", "caf\xC3\xA9 \xF0\x9F\x98\x80", "",
                                            "raw \xE2\x80\x94 utf-8"};
  for (const char* name : {"valid_jsonl", "valid_jsonl_big_block", "valid_jsonl_zst", "valid_jsonl_gz"})
    EXPECT_EQ(docs(name), records) << name;
  size_t bad = 0;
  EXPECT_EQ(docs("valid_skipped_bad_record", &bad), records);
  EXPECT_EQ(bad, 2u);
  const std::vector<std::string> text = {"one document\n", "two\nlines\n", "three, no newline"};
  EXPECT_EQ(docs("valid_text"), text);
  EXPECT_EQ(docs("valid_text_xz"), text);
}

}  // namespace
}  // namespace mptrain
