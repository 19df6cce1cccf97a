// LayerNorm forward/backward on the GPU against the CPU op, every storage type; the backward's
// += contract (pre-filled gradients) and its determinism.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cuda/layernorm.h"
#include "backend/ops/layernorm.h"
#include "common/cpu_fp32.h"
#include "cuda/gpu_test_util.h"

namespace mptrain {
namespace {

using namespace gputest;

template <class T>
class CudaLayerNorm : public ::testing::Test {};
TYPED_TEST_SUITE(CudaLayerNorm, StorageTypes);

struct Case {
  int N, C;
};
const Case kCases[] = {{1, 31},  {3, 32},   {5, 33},  {31, 127},  {32, 128},  {33, 129},
                       {7, 260}, {600, 64}, {2, 768}, {70, 1600}, {40000, 32},
                       {3, 6016}};  // the backward's largest C (shared memory)

TYPED_TEST(CudaLayerNorm, ForwardBackwardMatchCpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const float eps = 1e-5f;
  for (const Case& k : kCases) {
    SCOPED_TRACE("N=" + std::to_string(k.N) + " C=" + std::to_string(k.C) + " " + type_name<T>());
    const size_t NC = static_cast<size_t>(k.N) * k.C;
    std::vector<float> x = rounded<T>(randn(NC, 1, 2.0f)), w = rounded<T>(randn(k.C, 2)),
                       b = rounded<T>(randn(k.C, 3)), dy = rounded<T>(randn(NC, 4)),
                       dx0 = rounded<T>(randn(NC, 5)), dw0 = rounded<T>(randn(k.C, 6)),
                       db0 = rounded<T>(randn(k.C, 7));
    for (size_t i = 0; i < NC; ++i) x[i] += 0.5f;  // a non-zero mean
    x = rounded<T>(x);
    auto gx = upload<T>(x), gw = upload<T>(w), gb = upload<T>(b), gdy = upload<T>(dy), out = poisoned<T>(NC);
    auto mean = poisoned<float>(k.N), rstd = poisoned<float>(k.N);
    cuda::layernorm_forward(out.data(), mean.data(), rstd.data(), gx.data(), gw.data(), gb.data(), k.N, k.C,
                            eps, false, ctx());
    std::vector<float> ref(NC), rmean(k.N), rrstd(k.N);
    cpu::layernorm_forward(ref.data(), rmean.data(), rrstd.data(), x.data(), w.data(), b.data(), k.N, k.C,
                           eps);
    EXPECT_LT(rel_err(download(out), ref), tolerance<T>());
    EXPECT_LT(rel_err(download(mean), rmean), 1e-5);
    EXPECT_LT(rel_err(download(rstd), rrstd), 1e-5);

    cuda::DeviceBuffer<float> scratch(cuda::layernorm_backward_scratch_floats(k.N, k.C));
    std::vector<float> first;
    for (int rep = 0; rep < 2; ++rep) {
      auto gdx = upload<T>(dx0), gdw = upload<T>(dw0), gdb = upload<T>(db0);
      cuda::layernorm_backward(gdx.data(), gdw.data(), gdb.data(), gdy.data(), gx.data(), gw.data(),
                               mean.data(), rstd.data(), scratch.data(), k.N, k.C, false, ctx());
      std::vector<float> rdx = dx0, rdw = dw0, rdb = db0;
      cpu::layernorm_backward(rdx.data(), rdw.data(), rdb.data(), dy.data(), x.data(), w.data(), rmean.data(),
                              rrstd.data(), k.N, k.C);
      const auto gotw = download(gdw);
      if (rep == 0) {
        EXPECT_LT(rel_err(download(gdx), rdx), tolerance<T>());
        EXPECT_LT(rel_err(gotw, rdw), tolerance<T>());
        EXPECT_LT(rel_err(download(gdb), rdb), tolerance<T>());
        first = gotw;
      } else {
        EXPECT_EQ(0, std::memcmp(first.data(), gotw.data(), first.size() * sizeof(float)))
            << "not deterministic";
      }
    }
  }
}

}  // namespace
}  // namespace mptrain
