// The data parsers on raw bytes (the fuzz targets' entry points): token-shard headers and GPT-2
// vocabularies (encoder.json NUL vocab.bpe), BERT vocab.txt and BERT instance files, held to
// their seed corpora in fuzz/corpus/.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/fuzz_corpus.h"
#include "core/error.h"
#include "data/bert_instances.h"
#include "data/gpt2_tokenizer.h"
#include "data/shard.h"
#include "data/wordpiece.h"

namespace mptrain {
namespace {

size_t shard_tokens(const std::string& bytes) {
  return parse_shard_header({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, "test");
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
}

TEST(Gpt2VocabBytes, SeedCorpus) {
  testing::check_fuzz_corpus("gpt2_vocab", [](const std::string& b) {
    const Gpt2Tokenizer tok = vocab(b);
    const std::string text = "hello world 12  <|endoftext|>";
    EXPECT_EQ(tok.decode(tok.encode(text, SpecialTokens::kAllowEot)), text);
  });
}

TEST(WordpieceVocabBytes, SeedCorpus) {
  testing::check_fuzz_corpus("wordpiece_vocab", [](const std::string& b) {
    WordpieceTokenizer tok(WordpieceVocab::parse(b, "vocab.txt"));
    EXPECT_EQ(tok.decode(tok.encode("the cats sat")), "the cats sat");
  });
}

TEST(BertInstancesBytes, SeedCorpus) {
  testing::check_fuzz_corpus("bert_instances", [](const std::string& b) {
    std::vector<uint64_t> aligned((b.size() + 7) / 8);  // the reader needs 8-byte alignment, as a mapping has
    if (!b.empty()) std::memcpy(aligned.data(), b.data(), b.size());
    const BertInstanceSections s =
        parse_bert_instances({reinterpret_cast<const std::byte*>(aligned.data()), b.size()}, "test.bin");
    EXPECT_EQ(s.offsets[s.header.num_instances], s.header.num_tokens);
  });
}

}  // namespace
}  // namespace mptrain
