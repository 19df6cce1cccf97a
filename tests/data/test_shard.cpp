// The llm.c token shard formats of data/shard.h (GPT-2's uint16, Llama 3's uint32): write/read
// round trip, the exact header and size on disk, empty shards, and the reader's errors for a bad
// magic, a bad version, a truncated or oversized file and a missing file; glob_shards.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "data/data_test_util.h"
#include "data/shard.h"

namespace mptrain {
namespace {

using data_test::TempDir;

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

template <class T>
std::vector<T> ids_of(const Shard& s) {
  std::vector<T> out;
  s.visit([&](auto ids) { out.assign(ids.begin(), ids.end()); });
  return out;
}

// n ids below `bound` from seed, the first ones given.
template <class T>
std::vector<T> random_ids(size_t n, unsigned seed, uint32_t bound, std::initializer_list<T> first) {
  std::mt19937 rng(seed);
  std::vector<T> ids(n);
  for (auto& t : ids) t = static_cast<T>(rng() % bound);
  std::copy(first.begin(), first.end(), ids.begin());
  return ids;
}

// A shard file's bytes: the header's magic, version, count and zeros, and the size.
void expect_layout(const std::string& bytes, int32_t magic, int32_t version, size_t count,
                   size_t token_bytes) {
  ASSERT_EQ(bytes.size(), 1024 + token_bytes * count);
  int32_t header[256];
  std::memcpy(header, bytes.data(), sizeof(header));
  EXPECT_EQ(header[0], magic);
  EXPECT_EQ(header[1], version);
  EXPECT_EQ(header[2], static_cast<int32_t>(count));
  for (int i = 3; i < 256; ++i) ASSERT_EQ(header[i], 0) << "header int " << i;
}

// Writes `tokens` as the shard `path`, reads them back (size, width, ids) and checks the file's
// layout under `magic` and `version`; returns the file's bytes.
template <class T>
std::string round_trip(const std::string& path, const std::vector<T>& tokens, int32_t magic,
                       int32_t version) {
  write_shard(path, tokens);
  Shard s(path);
  EXPECT_EQ(s.path(), path);
  EXPECT_EQ(s.size(), tokens.size());
  EXPECT_EQ(s.token_bytes(), sizeof(T));
  EXPECT_EQ(ids_of<T>(s), tokens);
  const std::string bytes = file_bytes(path);
  expect_layout(bytes, magic, version, tokens.size(), sizeof(T));
  return bytes;
}

std::string shard_error(const std::string& path) {
  try {
    Shard s(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no Error thrown)";
}

// A header with the given fields followed by `tokens` uint16 zeros.
std::string raw_shard(int32_t magic, int32_t version, int32_t count, size_t tokens) {
  std::string bytes(kShardHeaderBytes + 2 * tokens, '\0');
  int32_t h[3] = {magic, version, count};
  std::memcpy(bytes.data(), h, sizeof(h));
  return bytes;
}

TEST(Shard, RoundTripAndHeader) {
  TempDir tmp;
  const auto tokens = random_ids<uint16_t>(10007, 3, 65536, {0, 65535, 50256});
  const std::string path = tmp / "x_train_000000.bin";
  // On disk: 256 little-endian int32 (magic, version, count, zeros), then uint16 tokens.
  const std::string bytes = round_trip(path, tokens, 20240520, 1);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1024 + 2]), 0xFF);  // little-endian 65535
  EXPECT_EQ(static_cast<unsigned char>(bytes[1024 + 4]), 50256 & 0xFF);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1024 + 5]), 50256 >> 8);

  // The atomic write leaves nothing else behind.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);

  // Rewriting replaces the content; a moved Shard keeps its mapping.
  write_shard(path, std::vector<uint16_t>{1, 2, 3});
  Shard first(path);
  Shard moved(std::move(first));
  EXPECT_EQ(moved.size(), 3u);
  EXPECT_EQ(ids_of<uint16_t>(moved), (std::vector<uint16_t>{1, 2, 3}));
}

// llm.c's format for vocabularies past 65,536 tokens (dev/data's "llama-3"): magic 20240801,
// version 7, uint32 ids.
TEST(Shard, WideRoundTripAndHeader) {
  TempDir tmp;
  const auto tokens = random_ids<uint32_t>(4099, 5, 151646, {128000, 65536, 0});
  const std::string bytes = round_trip(tmp / "w_train_000000.bin", tokens, 20240801, 7);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1024 + 4 + 2]), 1);  // little-endian 65536: 00 00 01 00
  // A wide header over uint16-sized data, and GPT-2's version under the wide magic, are refused.
  std::string half = bytes.substr(0, 1024) + std::string(2 * tokens.size(), '\0');
  data_test::write_bytes(tmp / "half.bin", half);
  std::string e = shard_error(tmp / "half.bin");
  EXPECT_NE(e.find("tokens of 4 bytes"), std::string::npos) << e;
  std::string v1 = bytes;
  const int32_t one = 1;
  std::memcpy(v1.data() + 4, &one, 4);
  data_test::write_bytes(tmp / "v1.bin", v1);
  e = shard_error(tmp / "v1.bin");
  EXPECT_NE(e.find("unsupported version 1 (expected 7 with magic 20240801)"), std::string::npos) << e;
}

TEST(Shard, EmptyShard) {
  TempDir tmp;
  write_shard(tmp / "e.bin", std::vector<uint16_t>{});
  Shard s(tmp / "e.bin");
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(file_bytes(tmp / "e.bin").size(), 1024u);
}

TEST(Shard, ReaderErrorsNameTheFileAndTheProblem) {
  TempDir tmp;
  auto put = [&](const std::string& name, const std::string& bytes) {
    data_test::write_bytes(tmp / name, bytes);
    return tmp / name;
  };
  std::string e = shard_error(put("magic.bin", raw_shard(20240326, 1, 4, 4)));
  EXPECT_NE(e.find("magic.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("bad magic 20240326"), std::string::npos) << e;
  e = shard_error(put("version.bin", raw_shard(20240520, 2, 4, 4)));
  EXPECT_NE(e.find("unsupported version 2"), std::string::npos) << e;
  e = shard_error(put("tiny.bin", std::string(100, '\0')));
  EXPECT_NE(e.find("truncated: 100 bytes"), std::string::npos) << e;
  e = shard_error(put("short.bin", raw_shard(20240520, 1, 10, 5)));
  EXPECT_NE(e.find("does not match the header's 10 tokens"), std::string::npos) << e;
  e = shard_error(put("long.bin", raw_shard(20240520, 1, 5, 10)));
  EXPECT_NE(e.find("does not match the header's 5 tokens"), std::string::npos) << e;
  std::string odd = raw_shard(20240520, 1, 5, 5) + "x";  // half a token more
  e = shard_error(put("odd.bin", odd));
  EXPECT_NE(e.find("does not match"), std::string::npos) << e;
  e = shard_error(put("negative.bin", raw_shard(20240520, 1, -1, 0)));
  EXPECT_NE(e.find("negative token count"), std::string::npos) << e;
  e = shard_error(tmp / "missing.bin");
  EXPECT_NE(e.find("cannot open shard"), std::string::npos) << e;
  EXPECT_NE(e.find("missing.bin"), std::string::npos) << e;
}

TEST(Shard, GlobShardsSortsAndRefusesNoMatch) {
  TempDir tmp;
  for (const char* n : {"c_train_000002.bin", "c_train_000000.bin", "c_val_000000.bin", "c_train_000001.bin"})
    write_shard(tmp / n, std::vector<uint16_t>{1});
  auto train = glob_shards(tmp / "c_train_*.bin");
  ASSERT_EQ(train.size(), 3u);
  EXPECT_EQ(train[0], tmp / "c_train_000000.bin");
  EXPECT_EQ(train[2], tmp / "c_train_000002.bin");
  try {
    glob_shards(tmp / "nothing_*.bin");
    FAIL() << "no Error thrown";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("no token shards match"), std::string::npos);
  }
}

// ShardWriter: the ids as they come, in pieces larger and smaller than its buffer, give the bytes
// write_shard writes for the whole; an unfinished shard (zero header) is refused by the reader.
TEST(Shard, WriterStreamsTheBytesOfTheWhole) {
  TempDir tmp;
  std::mt19937 rng(7);
  for (bool wide : {false, true}) {
    std::vector<int> ids(1'500'000);
    for (int& id : ids) id = static_cast<int>(rng() % (wide ? 200000u : 65536u));
    ShardWriter w(tmp / "streamed.bin", wide);
    for (size_t at = 0; at < ids.size();) {
      const size_t n = std::min<size_t>(ids.size() - at, rng() % 700000);
      w.append(std::span<const int>(ids).subspan(at, n));
      at += n;
    }
    EXPECT_EQ(w.size(), ids.size());
    w.finish();
    if (wide)
      write_shard(tmp / "whole.bin", std::vector<uint32_t>(ids.begin(), ids.end()));
    else
      write_shard(tmp / "whole.bin", std::vector<uint16_t>(ids.begin(), ids.end()));
    auto bytes = [](const std::string& p) {
      std::ifstream f(p, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(f), {});
    };
    EXPECT_TRUE(bytes(tmp / "streamed.bin") == bytes(tmp / "whole.bin")) << "wide " << wide;
    EXPECT_EQ(Shard(tmp / "streamed.bin").size(), ids.size());
  }
  {
    ShardWriter unfinished(tmp / "unfinished.bin", false);
    unfinished.append(std::vector<int>{1, 2, 3});
  }
  EXPECT_THROW(Shard(tmp / "unfinished.bin"), Error);
}

}  // namespace
}  // namespace mptrain
