// BERT pretraining instances on disk: the output of `mptrain prepare --task bert`, the
// input of BertLoader (data/bert_loader.h). One file per split.
//
// Layout (little-endian; every section starts at a multiple of 8 bytes):
//   header     256 bytes (BertInstanceHeader below, zero-padded)
//   vocab      vocab_bytes of vocab.txt text (the vocabulary the ids index; the file
//              is self-contained: the loader takes the special ids and the random-
//              replacement tokens from it, fill-mask can decode with it)
//   offsets    uint64[num_instances + 1]: instance i is tokens[offsets[i], offsets[i+1])
//   nsp        uint8[num_instances]: 0 = IsNext (B follows A), 1 = NotNext (B is random)
//   tokens     uint16[num_tokens]: per instance [CLS] A... [SEP] B... [SEP], unmasked.
// Token-type (segment) ids are implicit: 0 up to and including the first [SEP], 1 after.
// Opening validates everything (magic, version, sizes, each instance's shape, every id
// below vocab_size), so a bad file fails with one clear message before training starts.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/wordpiece.h"

namespace mptrain {

inline constexpr char kBertInstanceMagic[8] = {'M', 'P', 'T', 'B', 'E', 'R', 'T', 'I'};
inline constexpr uint32_t kBertInstanceVersion = 1;
inline constexpr size_t kBertInstanceHeaderBytes = 256;
inline constexpr uint32_t kBertFlagLowerCase = 1;  // the text was lower-cased (uncased vocab)

struct BertInstanceHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;  // 256
  uint32_t max_seq_len;   // no instance is longer (special tokens included)
  uint32_t vocab_size;
  uint64_t num_instances;
  uint64_t num_tokens;
  uint64_t vocab_bytes;
  uint64_t vocab_fingerprint;  // WordpieceVocab::fingerprint()
  int32_t pad_id, unk_id, cls_id, sep_id, mask_id;
  uint32_t flags;          // kBertFlagLowerCase
  uint32_t dupe_factor;    // how it was made (informational)
  uint32_t num_documents;  // documents it was made from (informational)
  uint64_t seed;           // prepare's seed (informational)
};
static_assert(sizeof(BertInstanceHeader) <= kBertInstanceHeaderBytes);

// One instance in memory (what prepare builds and the writer stores).
struct BertInstance {
  std::vector<uint16_t> tokens;  // [CLS] A [SEP] B [SEP]
  uint8_t nsp_label = 0;         // 0 IsNext, 1 NotNext
};

struct BertInstanceWriteInfo {
  uint32_t max_seq_len = 0;
  uint32_t dupe_factor = 0;
  uint32_t num_documents = 0;
  uint64_t seed = 0;
  bool lower_case = true;
};

// Writes instances atomically (temporary name, fsync, rename). Checks each instance
// as the reader does.
void write_bert_instances(const std::string& path, const WordpieceVocab& vocab,
                          std::span<const BertInstance> instances, const BertInstanceWriteInfo& info);

// The sections of a whole instance file held in memory, validated exactly as BertInstanceFile
// describes below; the pointers point into `bytes` (which must be 8-byte aligned). `path`
// names the file in errors. BertInstanceFile calls it on its mapping; the fuzz target
// (fuzz/bert_instances_fuzz.cpp) on raw bytes.
struct BertInstanceSections {
  BertInstanceHeader header{};
  WordpieceVocab vocab;
  const uint64_t* offsets = nullptr;
  const uint8_t* nsp = nullptr;
  const uint16_t* tokens = nullptr;
};
BertInstanceSections parse_bert_instances(std::span<const std::byte> bytes, const std::string& path);

// A read-only, memory-mapped, validated instance file.
class BertInstanceFile {
 public:
  // Throws Error naming the file: not an instance file (magic), another format version
  // ("instance file X has format version N, expected M"), truncated or oversized, a
  // vocabulary that does not parse or disagrees with the header, a malformed instance
  // (where and what), an id >= vocab_size, an NSP label other than 0/1.
  explicit BertInstanceFile(const std::string& path);
  ~BertInstanceFile();
  BertInstanceFile(BertInstanceFile&& other) noexcept;
  BertInstanceFile(const BertInstanceFile&) = delete;
  BertInstanceFile& operator=(const BertInstanceFile&) = delete;
  BertInstanceFile& operator=(BertInstanceFile&&) = delete;

  const std::string& path() const { return path_; }
  const BertInstanceHeader& header() const { return header_; }
  const WordpieceVocab& vocab() const { return vocab_; }
  size_t size() const { return header_.num_instances; }
  int max_seq_len() const { return static_cast<int>(header_.max_seq_len); }
  bool lower_case() const { return (header_.flags & kBertFlagLowerCase) != 0; }

  std::span<const uint16_t> tokens(size_t i) const {
    return {tokens_ + offsets_[i], static_cast<size_t>(offsets_[i + 1] - offsets_[i])};
  }
  int nsp_label(size_t i) const { return nsp_[i]; }
  // Position of the first [SEP] in instance i (end of segment A, token type 0 up to it).
  int first_sep(size_t i) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  BertInstanceHeader header_{};
  WordpieceVocab vocab_;
  const uint64_t* offsets_ = nullptr;
  const uint8_t* nsp_ = nullptr;
  const uint16_t* tokens_ = nullptr;
};

}  // namespace mptrain
