// Fuzzes the BERT pretraining-instance reader (data/bert_instances.h, parse_bert_instances) on
// raw file bytes: header counts, section layout, the embedded vocab.txt, instance offsets,
// every instance's shape and ids, NSP labels. A rejected file must throw mptrain::Error; in an
// accepted one every instance is read in full ([CLS] first, ids below the vocabulary size), and
// one row of the loader's batch buffers (max_seq_len ints, which BertLoader and `tokenizer
// show-instances` allocate from the header) is allocated, so that an unbounded max_seq_len
// trips -malloc_limit_mb.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "core/error.h"
#include "data/bert_instances.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader needs 8-byte alignment (a mapping is page-aligned); libFuzzer's buffer already
  // is, but copy to be sure, keeping the exact size so that ASan sees reads past the end.
  std::vector<uint64_t> aligned((size + 7) / 8);
  if (size > 0) std::memcpy(aligned.data(), data, size);  // memcpy from/to null is UB even for 0 bytes
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(aligned.data()), size);
  try {
    const mptrain::BertInstanceSections s = mptrain::parse_bert_instances(bytes, "fuzz.bin");
    for (uint64_t i = 0; i < s.header.num_instances; ++i) {
      const uint64_t begin = s.offsets[i], end = s.offsets[i + 1];
      if (end - begin < 5 || s.tokens[begin] != s.vocab.special().cls || s.nsp[i] > 1) __builtin_trap();
      for (uint64_t k = begin; k < end; ++k)
        if (s.tokens[k] >= s.vocab.size()) __builtin_trap();
    }
    std::vector<int32_t> row(s.header.max_seq_len, 0);  // a batch of one, as the loader sizes it
    volatile int32_t sink = row.back();
    (void)sink;
  } catch (const mptrain::Error&) {
  }
  return 0;
}
