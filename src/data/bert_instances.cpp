// Writing and memory-mapped, validated reading of BERT instance files.
#include "data/bert_instances.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "io/fileutil.h"

namespace mptrain {

namespace {

size_t round8(size_t n) { return (n + 7) & ~size_t{7}; }

struct Sections {
  size_t vocab, offsets, nsp, tokens, end;
};

// Section offsets from the header's counts; false when they overflow (a corrupt header).
bool layout(const BertInstanceHeader& h, Sections& s) {
  constexpr uint64_t kLimit = uint64_t{1} << 56;  // far beyond any real file; keeps sums exact
  if (h.vocab_bytes > kLimit || h.num_instances > kLimit || h.num_tokens > kLimit) return false;
  s.vocab = kBertInstanceHeaderBytes;
  s.offsets = s.vocab + round8(h.vocab_bytes);
  s.nsp = s.offsets + (h.num_instances + 1) * sizeof(uint64_t);
  s.tokens = s.nsp + round8(h.num_instances);
  s.end = s.tokens + h.num_tokens * sizeof(uint16_t);
  return true;
}

// The shape every instance must have; returns "" or what is wrong. `get(k)` is token k.
template <class Get>
std::string check_instance(size_t len, Get get, uint32_t max_seq_len, uint32_t vocab_size,
                           const BertSpecialIds& sp) {
  if (len < 5) return "has " + std::to_string(len) + " tokens, fewer than [CLS] A [SEP] B [SEP]";
  if (len > max_seq_len)
    return "has " + std::to_string(len) + " tokens, more than the file's max_seq_len " +
           std::to_string(max_seq_len);
  if (get(0) != sp.cls) return "does not start with [CLS]";
  if (get(len - 1) != sp.sep) return "does not end with [SEP]";
  int seps = 0;
  size_t first_sep = 0;
  for (size_t k = 0; k < len; ++k) {
    const int id = get(k);
    if (static_cast<uint32_t>(id) >= vocab_size)
      return "holds token id " + std::to_string(id) + " at position " + std::to_string(k) +
             ", out of range for a vocabulary of " + std::to_string(vocab_size);
    if (id == sp.sep && seps++ == 0) first_sep = k;
    if ((id == sp.cls && k != 0) || id == sp.pad)
      return "holds [CLS] or [PAD] at position " + std::to_string(k);
  }
  if (seps != 2) return "holds " + std::to_string(seps) + " [SEP] tokens instead of 2";
  if (first_sep < 2 || first_sep + 2 >= len) return "has an empty segment A or B";
  return "";
}

}  // namespace

void write_bert_instances(const std::string& path, const WordpieceVocab& vocab,
                          std::span<const BertInstance> instances, const BertInstanceWriteInfo& info) {
  MPT_CHECK(vocab.size() <= 65536, "instance file '" + path +
                                       "': token ids are stored as uint16; the vocabulary of " +
                                       std::to_string(vocab.size()) + " tokens is too large");
  const std::string vocab_text = vocab.to_text();
  BertInstanceHeader h{};
  std::memcpy(h.magic, kBertInstanceMagic, sizeof(h.magic));
  h.version = kBertInstanceVersion;
  h.header_bytes = kBertInstanceHeaderBytes;
  h.max_seq_len = info.max_seq_len;
  h.vocab_size = static_cast<uint32_t>(vocab.size());
  h.num_instances = instances.size();
  for (const auto& inst : instances) h.num_tokens += inst.tokens.size();
  h.vocab_bytes = vocab_text.size();
  h.vocab_fingerprint = vocab.fingerprint();
  const BertSpecialIds& sp = vocab.special();
  h.pad_id = sp.pad;
  h.unk_id = sp.unk;
  h.cls_id = sp.cls;
  h.sep_id = sp.sep;
  h.mask_id = sp.mask;
  h.flags = info.lower_case ? kBertFlagLowerCase : 0;
  h.dupe_factor = info.dupe_factor;
  h.num_documents = info.num_documents;
  h.seed = info.seed;

  Sections s{};
  MPT_CHECK(layout(h, s), "instance file '" + path + "': too large");
  std::string buf(s.end, '\0');
  std::memcpy(buf.data(), &h, sizeof(h));
  std::memcpy(buf.data() + s.vocab, vocab_text.data(), vocab_text.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < instances.size(); ++i) {
    const auto& t = instances[i].tokens;
    const std::string what = check_instance(
        t.size(), [&](size_t k) { return int(t[k]); }, h.max_seq_len, h.vocab_size, sp);
    if (!what.empty())
      throw Error("instance file '" + path + "': instance " + std::to_string(i) + " " + what);
    MPT_CHECK(instances[i].nsp_label <= 1, "instance file '" + path + "': NSP label must be 0 or 1");
    std::memcpy(buf.data() + s.offsets + i * sizeof(uint64_t), &offset, sizeof(offset));
    buf[s.nsp + i] = static_cast<char>(instances[i].nsp_label);
    std::memcpy(buf.data() + s.tokens + offset * sizeof(uint16_t), t.data(), t.size() * sizeof(uint16_t));
    offset += t.size();
  }
  std::memcpy(buf.data() + s.offsets + instances.size() * sizeof(uint64_t), &offset, sizeof(offset));
  write_file_atomic(path, buf.data(), buf.size());
}

namespace {

std::string truncated_header(const std::string& name, size_t bytes) {
  return name + " is truncated: " + std::to_string(bytes) + " bytes, smaller than the " +
         std::to_string(kBertInstanceHeaderBytes) + "-byte header";
}

}  // namespace

BertInstanceSections parse_bert_instances(std::span<const std::byte> bytes_in, const std::string& path) {
  const std::string name = "instance file '" + path + "'";
  const size_t bytes = bytes_in.size();
  if (bytes < kBertInstanceHeaderBytes) throw Error(truncated_header(name, bytes));
  BertInstanceSections out;
  const char* base = reinterpret_cast<const char*>(bytes_in.data());
  std::memcpy(&out.header, base, sizeof(out.header));
  const BertInstanceHeader& h = out.header;
  if (std::memcmp(h.magic, kBertInstanceMagic, sizeof(h.magic)) != 0)
    throw Error(name + " is not a BERT instance file (bad magic; make one with mptrain prepare --task bert)");
  if (h.version != kBertInstanceVersion)
    throw Error("instance file " + path + " has format version " + std::to_string(h.version) + ", expected " +
                std::to_string(kBertInstanceVersion) + " (prepare it again with this mptrain)");
  if (h.header_bytes != kBertInstanceHeaderBytes) throw Error(name + ": bad header size");
  Sections s{};
  if (!layout(h, s)) throw Error(name + ": corrupt header (impossible counts)");
  if (bytes != s.end)
    throw Error(name + " is " + (bytes < s.end ? "truncated" : "longer than its header says") + ": " +
                std::to_string(bytes) + " bytes, the header's " + std::to_string(h.num_instances) +
                " instances and " + std::to_string(h.num_tokens) + " tokens need " + std::to_string(s.end));
  out.vocab = WordpieceVocab::parse(std::string_view(base + s.vocab, h.vocab_bytes), path + " (embedded vocabulary)");
  const BertSpecialIds& sp = out.vocab.special();
  if (static_cast<uint32_t>(out.vocab.size()) != h.vocab_size || out.vocab.fingerprint() != h.vocab_fingerprint ||
      sp.pad != h.pad_id || sp.unk != h.unk_id || sp.cls != h.cls_id || sp.sep != h.sep_id || sp.mask != h.mask_id)
    throw Error(name + ": the embedded vocabulary disagrees with the header; the file is corrupt");
  // Bounded as prepare bounds it: readers size batch buffers (B x max_seq_len) from this field.
  if (h.max_seq_len < 5 || h.max_seq_len > 65535)
    throw Error(name + ": max_seq_len " + std::to_string(h.max_seq_len) + " is outside 5..65535");
  out.offsets = reinterpret_cast<const uint64_t*>(base + s.offsets);
  out.nsp = reinterpret_cast<const uint8_t*>(base + s.nsp);
  out.tokens = reinterpret_cast<const uint16_t*>(base + s.tokens);
  if (out.offsets[0] != 0 || out.offsets[h.num_instances] != h.num_tokens)
    throw Error(name + ": the instance offsets do not cover the tokens; the file is corrupt");
  for (size_t i = 0; i < h.num_instances; ++i) {
    if (out.offsets[i + 1] < out.offsets[i] || out.offsets[i + 1] > h.num_tokens)
      throw Error(name + ": instance offsets are not increasing at instance " + std::to_string(i));
    const uint16_t* t = out.tokens + out.offsets[i];
    const std::string what = check_instance(
        out.offsets[i + 1] - out.offsets[i], [&](size_t k) { return int(t[k]); }, h.max_seq_len, h.vocab_size, sp);
    if (!what.empty()) throw Error(name + ": instance " + std::to_string(i) + " " + what);
    if (out.nsp[i] > 1)
      throw Error(name + ": instance " + std::to_string(i) + " has NSP label " + std::to_string(out.nsp[i]) +
                  " (must be 0 or 1)");
  }
  return out;
}

BertInstanceFile::BertInstanceFile(const std::string& path) : path_(path) {
  const std::string name = "instance file '" + path + "'";
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error("cannot open " + name + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error("cannot stat " + name);
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes < kBertInstanceHeaderBytes) {  // also keeps mmap from seeing a length of 0
    ::close(fd);
    throw Error(truncated_header(name, bytes));
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw Error("cannot map " + name + ": " + std::strerror(errno));
  map_ = map;
  map_bytes_ = bytes;
  try {
    BertInstanceSections s = parse_bert_instances({static_cast<const std::byte*>(map_), bytes}, path);
    header_ = s.header;
    vocab_ = std::move(s.vocab);
    offsets_ = s.offsets;
    nsp_ = s.nsp;
    tokens_ = s.tokens;
  } catch (...) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw;
  }
}

BertInstanceFile::BertInstanceFile(BertInstanceFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(o.map_),
      map_bytes_(o.map_bytes_),
      header_(o.header_),
      vocab_(std::move(o.vocab_)),
      offsets_(o.offsets_),
      nsp_(o.nsp_),
      tokens_(o.tokens_) {
  o.map_ = nullptr;
  o.map_bytes_ = 0;
}

BertInstanceFile::~BertInstanceFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

int BertInstanceFile::first_sep(size_t i) const {
  const auto t = tokens(i);
  const int sep = header_.sep_id;
  for (size_t k = 0; k < t.size(); ++k)
    if (t[k] == sep) return static_cast<int>(k);
  return static_cast<int>(t.size()) - 1;  // unreachable for a validated file
}

}  // namespace mptrain
