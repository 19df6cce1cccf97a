// LayerNorm forward/backward on the GPU against the CPU op, every storage type; the fused
// residual + LayerNorm against its unfused twin (bit-identical) and against the CPU; the
// backward's += contract (pre-filled gradients) and its determinism.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cuda/layernorm.h"
#include "backend/cuda/residual.h"
#include "backend/ops/layernorm.h"
#include "backend/ops/residual.h"
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
                            eps, ctx());
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
                               mean.data(), rstd.data(), scratch.data(), k.N, k.C, ctx());
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

TYPED_TEST(CudaLayerNorm, FusedResidualMatchesUnfusedTwinAndCpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const float eps = 1e-5f;
  for (const Case& k : kCases) {
    SCOPED_TRACE("N=" + std::to_string(k.N) + " C=" + std::to_string(k.C) + " " + type_name<T>());
    const size_t NC = static_cast<size_t>(k.N) * k.C;
    std::vector<float> a = rounded<T>(randn(NC, 11)), b = rounded<T>(randn(NC, 12)),
                       w = rounded<T>(randn(k.C, 13)), bias = rounded<T>(randn(k.C, 14));
    auto ga = upload<T>(a), gb = upload<T>(b), gw = upload<T>(w), gbias = upload<T>(bias);
    // fused
    auto res = poisoned<T>(NC), out = poisoned<T>(NC);
    auto mean = poisoned<float>(k.N), rstd = poisoned<float>(k.N);
    cuda::residual_layernorm_forward(res.data(), out.data(), mean.data(), rstd.data(), ga.data(), gb.data(),
                                     gw.data(), gbias.data(), k.N, k.C, eps, ctx());
    // unfused twin
    auto res2 = poisoned<T>(NC), out2 = poisoned<T>(NC);
    auto mean2 = poisoned<float>(k.N), rstd2 = poisoned<float>(k.N);
    cuda::copy_device(res2.data(), ga.data(), NC * sizeof(T), ctx());
    cuda::accumulate(res2.data(), gb.data(), NC, ctx());
    cuda::layernorm_forward(out2.data(), mean2.data(), rstd2.data(), res2.data(), gw.data(), gbias.data(),
                            k.N, k.C, eps, ctx());
    const auto o1 = download(out), o2 = download(out2), r1 = download(res), r2 = download(res2);
    EXPECT_EQ(0, std::memcmp(o1.data(), o2.data(), o1.size() * sizeof(float))) << "fused != unfused";
    EXPECT_EQ(0, std::memcmp(r1.data(), r2.data(), r1.size() * sizeof(float))) << "fused residual != unfused";
    // CPU: residual then LayerNorm on the rounded residual
    std::vector<float> rres(NC), ref(NC), rm(k.N), rs(k.N);
    cpu::residual_forward(rres.data(), a.data(), b.data(), NC);
    rres = rounded<T>(rres);
    cpu::layernorm_forward(ref.data(), rm.data(), rs.data(), rres.data(), w.data(), bias.data(), k.N, k.C,
                           eps);
    EXPECT_LT(rel_err(r1, rres), tolerance<T>());
    EXPECT_LT(rel_err(o1, ref), tolerance<T>());
    // in place: the residual stream updated where it lives (residual_out aliases a)
    cuda::residual_layernorm_forward(ga.data(), out.data(), mean.data(), rstd.data(), ga.data(), gb.data(),
                                     gw.data(), gbias.data(), k.N, k.C, eps, ctx());
    const auto inplace = download(ga), o3 = download(out);
    EXPECT_EQ(0, std::memcmp(inplace.data(), r1.data(), r1.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(o3.data(), o1.data(), o1.size() * sizeof(float)));
  }
}

}  // namespace
}  // namespace mptrain
