// parse_safetensors on raw bytes (the fuzz target's entry point): the seed corpus of
// fuzz/corpus/safetensors under the valid_/bad_ naming rule, and size/offset claims that must
// be refused before anything is allocated or read.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "common/fuzz_corpus.h"
#include "core/error.h"
#include "io/safetensors.h"

namespace mptrain {
namespace {

SafetensorsContents parse(const std::string& bytes) {
  return parse_safetensors({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, "'test'");
}

std::string file(const std::string& header, const std::string& data, uint64_t claimed = UINT64_MAX) {
  uint64_t n = claimed == UINT64_MAX ? header.size() : claimed;
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

TEST(SafetensorsBytes, SeedCorpus) {
  testing::check_fuzz_corpus("safetensors", [](const std::string& bytes) {
    for (const auto& [name, t] : parse(bytes).tensors) {  // every view lies inside the bytes
      const auto* begin = reinterpret_cast<const std::byte*>(bytes.data());
      EXPECT_GE(t.data, begin);
      EXPECT_LE(t.data + t.nbytes, begin + bytes.size());
    }
  });
}

TEST(SafetensorsBytes, SizeClaimsAreCheckedFirst) {
  // A header length of 2^62 must be refused from the 8 length bytes alone, not allocated.
  EXPECT_THROW(parse(file("{}", "", uint64_t{1} << 62)), Error);
  EXPECT_THROW(parse(std::string(7, '\0')), Error);  // shorter than the length field
  // Offsets past the data, an end before the begin, a shape whose size overflows.
  EXPECT_THROW(parse(file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(8, 'x'))),
               Error);
  EXPECT_THROW(parse(file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", std::string(8, 'x'))),
               Error);
  EXPECT_THROW(parse(file(R"({"w":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,8]}})",
                          std::string(8, 'x'))),
               Error);
  const SafetensorsContents ok =
      parse(file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(8, 'x')));
  EXPECT_EQ(ok.tensors.at("w").nbytes, 8u);
}

}  // namespace
}  // namespace mptrain
