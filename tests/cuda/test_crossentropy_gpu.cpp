// Fused softmax + cross-entropy + dlogits on the GPU against the CPU op, every storage type,
// padded vocabularies (Vp > V, padded logits set huge so that any leak into the softmax shows),
// ignored rows, dlogits aliasing logits, and loss-only calls.
#include <gtest/gtest.h>

#include "backend/cuda/crossentropy.h"
#include "backend/ops/crossentropy.h"
#include "cuda/gpu_test_util.h"

namespace mptrain {
namespace {

using namespace gputest;

template <class T>
class CudaCrossEntropy : public ::testing::Test {};
TYPED_TEST_SUITE(CudaCrossEntropy, StorageTypes);

struct Case {
  int N, V, Vp;
};
const Case kCases[] = {{1, 1, 1},     {3, 31, 32},     {4, 32, 32},      {5, 33, 40},
                       {7, 127, 128}, {2, 128, 128},   {9, 129, 136},    {3, 260, 264},
                       {2, 260, 261}, {4, 5000, 5056}, {2, 50257, 50304}};

TYPED_TEST(CudaCrossEntropy, MatchesCpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  for (const Case& k : kCases) {
    SCOPED_TRACE("N=" + std::to_string(k.N) + " V=" + std::to_string(k.V) + " Vp=" + std::to_string(k.Vp) +
                 " " + type_name<T>());
    const size_t NV = static_cast<size_t>(k.N) * k.Vp;
    std::vector<float> logits = randn(NV, 1, 2.0f);
    for (int n = 0; n < k.N; ++n)
      for (int j = k.V; j < k.Vp; ++j)
        logits[static_cast<size_t>(n) * k.Vp + j] = 1000.0f;  // must be ignored
    logits = rounded<T>(logits);
    std::vector<int> targets(k.N);
    std::vector<float> dloss(k.N);
    for (int n = 0; n < k.N; ++n) {
      targets[n] = static_cast<int>(mix64(n + 3) % k.V);
      dloss[n] = 1.0f / k.N * (1.0f + 0.1f * n);
    }
    if (k.N > 2) targets[1] = -1;  // an ignored row
    cuda::DeviceBuffer<int> gt(targets, ctx());
    cuda::DeviceBuffer<float> gdl(dloss, ctx());
    auto gl = upload<T>(logits);
    auto losses = poisoned<float>(k.N), dlogits = poisoned<T>(NV);
    cuda::crossentropy_forward_backward(losses.data(), dlogits.data(), gl.data(), gt.data(), gdl.data(), k.N,
                                        k.V, k.Vp, ctx());
    std::vector<float> rloss(k.N), rd(NV);
    cpu::crossentropy_forward_backward(rloss.data(), rd.data(), logits.data(), targets.data(), dloss.data(),
                                       k.N, k.V, k.Vp);
    EXPECT_LT(rel_err(download(losses), rloss), 1e-5);
    const auto got = download(dlogits);
    EXPECT_LT(rel_err(got, rd), tolerance<T>());
    for (int n = 0; n < k.N; ++n)
      for (int j = k.V; j < k.Vp; ++j)
        ASSERT_EQ(got[static_cast<size_t>(n) * k.Vp + j], 0.0f) << "padded column";

    // loss only (no dlogits, no dloss)
    auto losses2 = poisoned<float>(k.N);
    cuda::crossentropy_forward_backward<T>(losses2.data(), nullptr, gl.data(), gt.data(), nullptr, k.N, k.V,
                                           k.Vp, ctx());
    EXPECT_EQ(rel_err(download(losses2), download(losses)), 0.0);
    // in place: dlogits aliases logits
    cuda::crossentropy_forward_backward(losses2.data(), gl.data(), gl.data(), gt.data(), gdl.data(), k.N, k.V,
                                        k.Vp, ctx());
    EXPECT_EQ(rel_err(download(gl), got), 0.0);
  }
}

TEST(CudaCrossEntropyTargets, OutOfRangeTargetGivesNaNLoss) {
  SKIP_WITHOUT_GPU();
  const int N = 2, V = 10, Vp = 16;
  cuda::DeviceBuffer<float> logits(std::vector<float>(N * Vp, 0.5f), ctx());
  cuda::DeviceBuffer<int> targets(std::vector<int>{3, 10}, ctx());
  auto losses = poisoned<float>(N);
  cuda::crossentropy_forward_backward<float>(losses.data(), nullptr, logits.data(), targets.data(), nullptr,
                                             N, V, Vp, ctx());
  const auto l = losses.download(ctx());
  EXPECT_NEAR(l[0], std::log(10.0f), 1e-6);
  EXPECT_TRUE(std::isnan(l[1]));
}

}  // namespace
}  // namespace mptrain
