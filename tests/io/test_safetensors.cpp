// safetensors: round trips of every dtype and odd shape, the writer's layout guarantees,
// hand-built files the reader must accept, one test per way a file can be malformed (each
// error must name the file and the tensor), and interop with the numpy reference reader.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/fileutil.h"
#include "io/safetensors.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;

constexpr DType kAllDTypes[] = {DType::F32, DType::BF16, DType::F16, DType::I32,
                                DType::I64, DType::U16,  DType::U8,  DType::F64};

// A fresh directory per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "mptrain_st_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  // Writes u64 N, the header text exactly as given, then `data`.
  std::string raw(const std::string& name, const std::string& header, const std::string& data = "") {
    std::string bytes(8, '\0');
    uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    bytes += header;
    bytes += data;
    std::string path = file(name);
    write_file_atomic(path, bytes);
    return path;
  }

  fs::path dir_;
};

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xff);
  return out;
}

// Runs fn, expects an mptrain::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    return;
  }
  ADD_FAILURE() << "no mptrain::Error thrown (expected one mentioning '" << (parts.empty() ? "" : parts[0])
                << "')";
}

TEST(SafetensorsDType, NamesAndSizes) {
  const char* names[] = {"F32", "BF16", "F16", "I32", "I64", "U16", "U8", "F64"};
  const size_t sizes[] = {4, 2, 2, 4, 8, 2, 1, 8};
  for (size_t i = 0; i < std::size(kAllDTypes); ++i) {
    EXPECT_STREQ(dtype_name(kAllDTypes[i]), names[i]);
    EXPECT_EQ(dtype_size(kAllDTypes[i]), sizes[i]);
    DType d{};
    ASSERT_TRUE(dtype_from_name(names[i], &d));
    EXPECT_EQ(d, kAllDTypes[i]);
  }
  DType d{};
  EXPECT_FALSE(dtype_from_name("f32", &d));
  EXPECT_FALSE(dtype_from_name("BOOL", &d));
}

TEST_F(SafetensorsTest, RoundTripEveryDTypeAndShape) {
  const std::vector<std::vector<int64_t>> shapes = {{},     {0},       {1},       {3},
                                                    {2, 3}, {4, 0, 5}, {1, 1, 7}, {3, 5, 2}};
  struct Expect {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
  };
  std::vector<Expect> expect;
  uint32_t seed = 1;
  for (DType dt : kAllDTypes) {
    for (const auto& shape : shapes) {
      size_t numel = 1;
      for (int64_t d : shape) numel *= static_cast<size_t>(d);
      std::string name = std::string(dtype_name(dt)) + ".t" + std::to_string(expect.size());
      expect.push_back({name, dt, shape, random_bytes(numel * dtype_size(dt), seed++)});
    }
  }
  SafetensorsWriter w;
  for (const Expect& e : expect) w.add(e.name, e.dtype, e.shape, e.bytes.empty() ? nullptr : e.bytes.data());
  EXPECT_EQ(w.size(), expect.size());
  w.write(file("all.safetensors"));

  SafetensorsFile f(file("all.safetensors"));
  EXPECT_EQ(f.names().size(), expect.size());
  EXPECT_TRUE(f.metadata().empty());
  for (const Expect& e : expect) {
    SCOPED_TRACE(e.name);
    ASSERT_TRUE(f.contains(e.name));
    const TensorView& t = f.get(e.name);
    EXPECT_EQ(t.name, e.name);
    EXPECT_EQ(t.dtype, e.dtype);
    EXPECT_EQ(t.shape, e.shape);
    EXPECT_EQ(t.nbytes, e.bytes.size());
    EXPECT_EQ(t.numel() * dtype_size(t.dtype), t.nbytes);
    if (e.shape.empty()) {
      EXPECT_EQ(t.numel(), 1u);
    }
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype), 0u)
        << "not aligned to its element size";
    if (t.nbytes) {
      EXPECT_EQ(std::memcmp(t.data, e.bytes.data(), t.nbytes), 0);
    }
  }
  EXPECT_FALSE(f.contains("nope"));
}

TEST_F(SafetensorsTest, ReadF32CopiesExactShape) {
  std::vector<float> v = {1.5f, -2.f, 3.25f, 0.f, 1e-30f, 7.f};
  SafetensorsWriter w;
  w.add("w", DType::F32, {2, 3}, v.data());
  float scalar = 42.f;
  w.add("s", DType::F32, {}, &scalar);
  w.write(file("f.safetensors"));
  SafetensorsFile f(file("f.safetensors"));
  std::vector<float> out(6, -1.f);
  const int64_t shape[] = {2, 3};
  f.read_f32("w", shape, out.data());
  EXPECT_EQ(out, v);
  float s = 0;
  f.read_f32("s", {}, &s);
  EXPECT_EQ(s, 42.f);
}

TEST_F(SafetensorsTest, HeaderPaddedTo8AndDataContiguous) {
  // Try every header length residue by varying the name length.
  for (int len = 1; len <= 9; ++len) {
    SafetensorsWriter w;
    uint8_t b[3] = {1, 2, 3};
    double d = 2.5;
    w.add(std::string(static_cast<size_t>(len), 'x'), DType::U8, {3}, b);
    w.add("d", DType::F64, {}, &d);
    w.set_metadata("k", std::string(static_cast<size_t>(len), 'm'));
    std::string path =
        file(std::to_string(len) + "p.safetensors");  // "p" + to_string trips GCC 12's -Wrestrict
    w.write(path);
    std::string bytes = read_file(path);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    EXPECT_EQ(n % 8, 0u);
    std::string header = bytes.substr(8, n);
    size_t close = header.find_last_of('}');
    ASSERT_NE(close, std::string::npos);
    EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos) << "padding must be spaces";
    EXPECT_EQ(bytes.size() - 8 - n, 3u + 8u) << "data section must hold exactly the tensors";
    SafetensorsFile f(path);
    EXPECT_EQ(f.metadata().at("k").size(), static_cast<size_t>(len));
    // F64 first (largest element), at the start of the data section.
    EXPECT_EQ(std::memcmp(bytes.data() + 8 + n, &d, 8), 0);
    EXPECT_EQ(f.get(std::string(static_cast<size_t>(len), 'x')).data - f.get("d").data, 8);
  }
}

TEST_F(SafetensorsTest, OutputIsDeterministicWhateverTheAddOrder) {
  std::vector<float> a = {1, 2, 3};
  std::vector<int64_t> b = {4, 5};
  uint16_t c = 7;
  SafetensorsWriter w1, w2;
  w1.add("a", DType::F32, {3}, a.data());
  w1.add("b", DType::I64, {2}, b.data());
  w1.add("c", DType::BF16, {}, &c);
  w1.set_metadata("x", "1");
  w1.set_metadata("y", "2");
  w2.set_metadata("y", "2");
  w2.add("c", DType::BF16, {}, &c);
  w2.add("b", DType::I64, {2}, b.data());
  w2.set_metadata("x", "1");
  w2.add("a", DType::F32, {3}, a.data());
  w1.write(file("1.safetensors"));
  w2.write(file("2.safetensors"));
  EXPECT_EQ(read_file(file("1.safetensors")), read_file(file("2.safetensors")));
}

TEST_F(SafetensorsTest, MetadataRoundTrip) {
  SafetensorsWriter w;
  float x = 1.f;
  w.add("x", DType::F32, {1}, &x);
  w.set_metadata("format", "pt");
  w.set_metadata("empty", "");
  w.set_metadata("quote\"and\\slash", "line\nbreak \xc3\xa9t\xc3\xa9");
  w.set_metadata("format", "mptrain");  // replaces
  w.write(file("m.safetensors"));
  SafetensorsFile f(file("m.safetensors"));
  const std::map<std::string, std::string> want = {
      {"format", "mptrain"}, {"empty", ""}, {"quote\"and\\slash", "line\nbreak \xc3\xa9t\xc3\xa9"}};
  EXPECT_EQ(f.metadata(), want);
  EXPECT_EQ(f.names(), std::vector<std::string>{"x"});
}

TEST_F(SafetensorsTest, AddCopyOwnsItsBytesAddReferences) {
  std::vector<int32_t> v = {1, 2, 3};
  SafetensorsWriter w;
  w.add_copy("copied", DType::I32, {3}, v.data());
  w.add("referenced", DType::I32, {3}, v.data());
  v[0] = 100;
  w.write(file("c.safetensors"));
  SafetensorsFile f(file("c.safetensors"));
  int32_t got = 0;
  std::memcpy(&got, f.get("copied").data, 4);
  EXPECT_EQ(got, 1);
  std::memcpy(&got, f.get("referenced").data, 4);
  EXPECT_EQ(got, 100);
}

TEST_F(SafetensorsTest, MoveKeepsViewsValid) {
  float x[2] = {3.f, 4.f};
  SafetensorsWriter w;
  w.add("x", DType::F32, {2}, x);
  w.write(file("mv.safetensors"));
  SafetensorsFile a(file("mv.safetensors"));
  const std::byte* p = a.get("x").data;
  SafetensorsFile b(std::move(a));
  EXPECT_EQ(b.get("x").data, p);
  float out[2];
  const int64_t shape[] = {2};
  b.read_f32("x", shape, out);
  EXPECT_EQ(out[1], 4.f);
}

TEST_F(SafetensorsTest, WriteReplacesAtomicallyAndLeavesNoTemporary) {
  float x = 1.f, y = 2.f;
  SafetensorsWriter w1, w2;
  w1.add("x", DType::F32, {}, &x);
  w2.add("y", DType::F32, {}, &y);
  w1.write(file("r.safetensors"));
  w2.write(file("r.safetensors"));
  SafetensorsFile f(file("r.safetensors"));
  EXPECT_EQ(f.names(), std::vector<std::string>{"y"});
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entries += (void(e), 1);
  EXPECT_EQ(entries, 1u);
  expect_error([&] { w1.write(file("no/such/dir/r.safetensors")); }, {"no/such/dir/r.safetensors"});
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  float x = 1.f;
  SafetensorsWriter w;
  w.add("x", DType::F32, {}, &x);
  expect_error([&] { w.add("x", DType::F32, {}, &x); }, {"'x'", "twice"});
  expect_error([&] { w.add("__metadata__", DType::F32, {}, &x); }, {"reserved"});
  expect_error([&] { w.add("", DType::F32, {}, &x); }, {"empty"});
  expect_error([&] { w.add("neg", DType::F32, {2, -1}, &x); }, {"'neg'", "[2, -1]"});
  expect_error([&] { w.add("null", DType::F32, {2}, nullptr); }, {"'null'", "null"});
  w.add("empty_ok", DType::F32, {0, 3}, nullptr);
  expect_error([&] { w.add("huge", DType::F64, {int64_t{1} << 40, int64_t{1} << 40}, &x); }, {"'huge'"});
}

// A file assembled by hand, the way other writers may lay it out: whitespace and newlines
// inside the JSON, a header length that is not a multiple of 8, unsorted tensors, a gap.
TEST_F(SafetensorsTest, AcceptsHandBuiltFileWithExtraSpaces) {
  std::string header =
      "  {\n  \"b\" : { \"dtype\":\"I32\", \"shape\": [ 2 ] , \"data_offsets\" : [ 0 , 8 ] } ,\n"
      "\t\"__metadata__\": {\"format\": \"pt\"},\n"
      "  \"a\" : {\"shape\":[],\"dtype\":\"U8\",\"data_offsets\":[12,13]},"
      "  \"e\" : {\"shape\":[0,4],\"dtype\":\"F32\",\"data_offsets\":[13,13]}  }   \n ";
  std::string data;
  int32_t b[2] = {-7, 9};
  data.append(reinterpret_cast<const char*>(b), 8);
  data += "GAP!";
  data += '\x2a';
  ASSERT_NE((header.size()) % 8, 0u);
  std::string path = raw("hand.safetensors", header, data);
  SafetensorsFile f(path);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"a", "b", "e"}));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  int32_t got[2];
  std::memcpy(got, f.get("b").data, 8);
  EXPECT_EQ(got[0], -7);
  EXPECT_EQ(got[1], 9);
  EXPECT_EQ(static_cast<char>(*f.get("a").data), '\x2a');
  EXPECT_EQ(f.get("e").nbytes, 0u);
  EXPECT_EQ(f.get("e").numel(), 0u);
  // An empty header object is a valid (empty) file.
  SafetensorsFile empty(raw("empty.safetensors", "{}      "));
  EXPECT_TRUE(empty.names().empty());
}

TEST_F(SafetensorsTest, ErrorsForMalformedFiles) {
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\0');
  struct Case {
    const char* what;
    std::string header;
    std::string data;
    std::vector<std::string> parts;  // besides the file name
  };
  const std::vector<Case> cases = {
      {"bad json", "{\"t\": {", eight, {"not valid JSON"}},
      {"not an object", "[1,2]", eight, {"not a JSON object"}},
      {"unknown dtype", R"({"t":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", eight, {"'t'", "'Q7'"}},
      {"missing dtype", R"({"t":{"shape":[2],"data_offsets":[0,8]}})", eight, {"'t'", "dtype"}},
      {"dtype not string", R"({"t":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", eight, {"'t'", "dtype"}},
      {"missing shape", R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", eight, {"'t'", "shape"}},
      {"shape not array", R"({"t":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", eight, {"'t'", "shape"}},
      {"negative extent",
       R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
       eight,
       {"'t'", "[-2]"}},
      {"float extent",
       R"({"t":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})",
       eight,
       {"'t'", "shape"}},
      {"missing offsets", R"({"t":{"dtype":"F32","shape":[2]}})", eight, {"'t'", "data_offsets"}},
      {"three offsets",
       R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})",
       eight,
       {"'t'", "data_offsets"}},
      {"string offsets",
       R"({"t":{"dtype":"F32","shape":[2],"data_offsets":["0",8]}})",
       eight,
       {"'t'", "data_offsets"}},
      {"negative offset",
       R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})",
       eight,
       {"'t'", "data_offsets"}},
      {"end before begin",
       R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})",
       eight,
       {"'t'", "end before"}},
      {"offsets out of range",
       R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       eight,
       {"'t'", "past the data section", "8 bytes"}},
      {"huge offsets",
       R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,18446744073709551615]}})",
       eight,
       {"'t'", "past the data section"}},
      {"size mismatch",
       R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
       eight,
       {"'t'", "holds 8 bytes", "F32 [3] needs 12"}},
      {"bf16 size mismatch",
       R"({"t":{"dtype":"BF16","shape":[2],"data_offsets":[0,8]}})",
       eight,
       {"'t'", "needs 4"}},
      {"numel overflow",
       R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
       eight,
       {"'t'", "overflows"}},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       eight,
       {"'a'", "'b'", "overlaps"}},
      {"same range twice",
       R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})",
       eight,
       {"'a'", "'b'", "overlaps"}},
      {"extra field",
       R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})",
       eight,
       {"'t'", "'x'"}},
      {"entry not object", R"({"t":[1]})", eight, {"'t'", "not an object"}},
      {"metadata not object", R"({"__metadata__":"x",)" + ok_entry + "}", eight, {"__metadata__"}},
      {"metadata value not string",
       R"({"__metadata__":{"n":1},)" + ok_entry + "}",
       eight,
       {"'n'", "not a string"}},
      {"duplicate name", "{" + ok_entry + "," + ok_entry + "}", eight, {"'t'", "twice"}},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::string path = raw("bad" + std::to_string(i++) + ".safetensors", c.header, c.data);
    std::vector<std::string> parts = c.parts;
    parts.push_back("'" + path + "'");
    expect_error([&] { SafetensorsFile f(path); }, parts);
  }
}

TEST_F(SafetensorsTest, ErrorsForTruncatedFiles) {
  expect_error([&] { SafetensorsFile f(file("missing.safetensors")); }, {"missing.safetensors"});
  std::string path = file("short.safetensors");
  write_file_atomic(path, std::string("\x10\0\0", 3));
  expect_error([&] { SafetensorsFile f(path); }, {"'" + path + "'", "shorter than the 8-byte"});
  write_file_atomic(path, std::string());
  expect_error([&] { SafetensorsFile f(path); }, {"'" + path + "'", "shorter"});

  // N beyond the file size, including a value that would overflow 8 + N.
  std::string big = raw("n.safetensors", "{}");
  std::string bytes = read_file(big);
  uint64_t n = 1000;
  std::memcpy(bytes.data(), &n, 8);
  write_file_atomic(big, bytes);
  expect_error([&] { SafetensorsFile f(big); }, {"'" + big + "'", "header length 1000 exceeds"});
  n = UINT64_MAX;
  std::memcpy(bytes.data(), &n, 8);
  write_file_atomic(big, bytes);
  expect_error([&] { SafetensorsFile f(big); }, {"'" + big + "'", "exceeds"});

  // A real file cut short inside its data section.
  std::vector<float> v(100, 1.f);
  SafetensorsWriter w;
  w.add("weights", DType::F32, {10, 10}, v.data());
  std::string good = file("good.safetensors");
  w.write(good);
  std::string all = read_file(good);
  std::string cut = file("cut.safetensors");
  write_file_atomic(cut, all.substr(0, all.size() - 1));
  expect_error([&] { SafetensorsFile f(cut); }, {"'" + cut + "'", "'weights'", "past the data section"});
  // ... and inside its header.
  write_file_atomic(cut, all.substr(0, 20));
  expect_error([&] { SafetensorsFile f(cut); }, {"'" + cut + "'", "exceeds"});
}

TEST_F(SafetensorsTest, ErrorsForMissingTensorAndWrongShapeOrDType) {
  std::vector<float> v(6, 0.f);
  int32_t i = 3;
  SafetensorsWriter w;
  w.add("w", DType::F32, {2, 3}, v.data());
  w.add("i", DType::I32, {}, &i);
  std::string path = file("s.safetensors");
  w.write(path);
  SafetensorsFile f(path);
  expect_error([&] { f.get("nope"); }, {"'" + path + "': no tensor 'nope'"});
  std::vector<float> out(6);
  const int64_t transposed[] = {3, 2};
  expect_error([&] { f.read_f32("w", transposed, out.data()); },
               {"'" + path + "'", "'w'", "[2, 3]", "[3, 2]"});
  const int64_t flat[] = {6};
  expect_error([&] { f.read_f32("w", flat, out.data()); }, {"'w'", "[2, 3]", "[6]"});
  expect_error([&] { f.read_f32("i", {}, out.data()); }, {"'i'", "I32", "expected F32"});
  expect_error([&] { f.read_f32("nope", {}, out.data()); }, {"no tensor 'nope'"});
}

// --- numpy reference (tests/ref/safetensors_np.py) ------------------------------------------

int run_command(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST_F(SafetensorsTest, NumpyReferenceReadsAndWritesTheSameFormat) {
  const std::string py = "/usr/bin/python3";
  if (::access(py.c_str(), X_OK) != 0) GTEST_SKIP() << py << " not found";
  if (run_command(py + " -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "numpy not importable";
  const std::string script = std::string(MPTRAIN_SOURCE_DIR) + "/tests/ref/safetensors_np.py";

  struct T {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
  };
  std::vector<T> ts;
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {5}, {3, 4}, {2, 0, 3}};
  uint32_t seed = 100;
  for (DType dt : kAllDTypes) {
    for (const auto& shape : shapes) {
      size_t numel = 1;
      for (int64_t d : shape) numel *= static_cast<size_t>(d);
      std::vector<std::byte> bytes = random_bytes(numel * dtype_size(dt), seed++);
      if (dt == DType::F32 || dt == DType::F64 || dt == DType::F16) {
        // Random bits may form NaNs, whose payloads numpy need not preserve: use real values.
        for (size_t k = 0; k < numel; ++k) {
          double val = static_cast<double>(k) * 0.37 - 1.5;
          if (dt == DType::F32) {
            float f = static_cast<float>(val);
            std::memcpy(bytes.data() + 4 * k, &f, 4);
          } else if (dt == DType::F64) {
            std::memcpy(bytes.data() + 8 * k, &val, 8);
          } else {
            uint16_t h = static_cast<uint16_t>(0x3c00 + k);  // 1.0 + k ulp
            std::memcpy(bytes.data() + 2 * k, &h, 2);
          }
        }
      }
      ts.push_back({std::string(dtype_name(dt)) + "/" + std::to_string(ts.size()), dt, shape, bytes});
    }
  }
  SafetensorsWriter w;
  for (const T& t : ts) w.add(t.name, t.dtype, t.shape, t.bytes.data());
  w.set_metadata("format", "mptrain");
  w.set_metadata("note", "caf\xc3\xa9 \"quoted\"");
  const std::string in = file("cpp.safetensors"), out = file("py.safetensors");
  w.write(in);

  ASSERT_EQ(run_command(py + " " + script + " copy '" + in + "' '" + out + "'"), 0);
  SafetensorsFile f(out);
  EXPECT_EQ(f.metadata(), SafetensorsFile(in).metadata());
  ASSERT_EQ(f.names().size(), ts.size());
  for (const T& t : ts) {
    SCOPED_TRACE(t.name);
    const TensorView& v = f.get(t.name);
    EXPECT_EQ(v.dtype, t.dtype);
    EXPECT_EQ(v.shape, t.shape);
    ASSERT_EQ(v.nbytes, t.bytes.size());
    if (v.nbytes) {
      EXPECT_EQ(std::memcmp(v.data, t.bytes.data(), v.nbytes), 0);
    }
  }
  // Python pads its header the same way, so the C++ reader's alignment claims hold for it too.
  std::string bytes = read_file(out);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);

  // Python must reject what C++ rejects: an overlap.
  std::string bad = raw("bad.safetensors",
                        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                        std::string(8, '\0'));
  EXPECT_NE(run_command(py + " " + script + " copy '" + bad + "' '" + file("x") + "' 2>/dev/null"), 0);
}

}  // namespace
}  // namespace mptrain
