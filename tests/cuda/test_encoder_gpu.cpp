// Encoder forward/backward on the GPU against the CPU op, every storage type; repeated tokens
// (the scatter case); the backward is bit-identical across runs (no atomics).
#include <gtest/gtest.h>

#include "backend/cuda/embeddings.h"
#include "common/cpu_fp32.h"
#include "cuda/gpu_test_util.h"

namespace mptrain {
namespace {

using namespace gputest;

template <class T>
class CudaEncoder : public ::testing::Test {};
TYPED_TEST_SUITE(CudaEncoder, StorageTypes);

struct Case {
  int B, T, C, V;
};
const Case kCases[] = {{1, 1, 31, 5},    {2, 31, 32, 7},      {3, 33, 33, 50},
                       {2, 127, 128, 3}, {1, 129, 260, 1000}, {4, 64, 64, 1}};

TYPED_TEST(CudaEncoder, ForwardBackwardMatchCpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  for (const Case& k : kCases) {
    SCOPED_TRACE("B=" + std::to_string(k.B) + " T=" + std::to_string(k.T) + " C=" + std::to_string(k.C) +
                 " " + type_name<T>());
    const size_t BT = static_cast<size_t>(k.B) * k.T;
    std::vector<int> tokens(BT);
    for (size_t i = 0; i < BT; ++i) tokens[i] = static_cast<int>(mix64(i * 31 + 7) % k.V);  // many repeats
    std::vector<float> wte = rounded<T>(randn(static_cast<size_t>(k.V) * k.C, 1)),
                       wpe = rounded<T>(randn(static_cast<size_t>(k.T) * k.C, 2)),
                       dout = rounded<T>(randn(BT * k.C, 3)), dwte = rounded<T>(randn(wte.size(), 4)),
                       dwpe = rounded<T>(randn(wpe.size(), 5));
    cuda::DeviceBuffer<int> dtok(tokens, ctx());
    auto gwte = upload<T>(wte), gwpe = upload<T>(wpe), gdout = upload<T>(dout), out = poisoned<T>(BT * k.C);
    cuda::embeddings_forward<T>(out.data(), dtok.data(), nullptr, gwte.data(), gwpe.data(), nullptr, k.B, k.T,
                                k.C, ctx());
    std::vector<float> ref(BT * k.C);
    cpu::encoder_forward(ref.data(), tokens.data(), wte.data(), wpe.data(), k.B, k.T, k.C);
    EXPECT_LT(rel_err(download(out), ref), tolerance<T>());

    const size_t sbytes = cuda::embeddings_backward_scratch_bytes(k.B, k.T);
    cuda::DeviceBuffer<char> scratch(sbytes);
    std::vector<float> first;
    for (int rep = 0; rep < 2; ++rep) {
      auto gdwte = upload<T>(dwte), gdwpe = upload<T>(dwpe);
      cuda::embeddings_backward<T>(gdwte.data(), gdwpe.data(), nullptr, gdout.data(), dtok.data(), nullptr,
                                   -1, scratch.data(), sbytes, k.B, k.T, k.C, 0, ctx());
      const auto got_wte = download(gdwte), got_wpe = download(gdwpe);
      if (rep == 0) {
        std::vector<float> rwte = dwte, rwpe = dwpe;
        cpu::encoder_backward(rwte.data(), rwpe.data(), dout.data(), tokens.data(), k.B, k.T, k.C);
        EXPECT_LT(rel_err(got_wte, rwte), tolerance<T>());
        EXPECT_LT(rel_err(got_wpe, rwpe), tolerance<T>());
        first = got_wte;
      } else {
        EXPECT_EQ(0, std::memcmp(first.data(), got_wte.data(), first.size() * sizeof(float)))
            << "not deterministic";
      }
    }
  }
}

TEST(CudaEncoderArgs, TooLittleScratchIsAClearError) {
  SKIP_WITHOUT_GPU();
  cuda::DeviceBuffer<float> buf(64);
  cuda::DeviceBuffer<int> tok(8);
  try {
    cuda::embeddings_backward<float>(buf.data(), buf.data(), nullptr, buf.data(), tok.data(), nullptr, -1,
                                     buf.data(), 4, 2, 4, 8, 0, ctx());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[embeddings_backward] scratch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mptrain
