// GELU and residual/accumulate on the GPU against the CPU ops, every storage type, sizes that
// straddle the pack and warp widths, the packed path and (offset by one element) the scalar
// path. Outputs are poisoned first.
#include <gtest/gtest.h>

#include "backend/cpu/context.h"
#include "backend/cuda/activations.h"
#include "backend/cuda/residual.h"
#include "backend/ops/residual.h"
#include "common/cpu_fp32.h"
#include "cuda/gpu_test_util.h"

namespace mptrain {
namespace {

using namespace gputest;

const size_t kSizes[] = {1, 7, 31, 32, 33, 127, 128, 129, 260, 4099};

template <class T>
class CudaElementwise : public ::testing::Test {};
TYPED_TEST_SUITE(CudaElementwise, StorageTypes);

TYPED_TEST(CudaElementwise, GeluForwardBackwardMatchCpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  for (size_t n : kSizes)
    for (size_t off : {0, 1}) {  // off = 1: misaligned pointers take the scalar path
      SCOPED_TRACE("n=" + std::to_string(n) + " offset=" + std::to_string(off) + " " + type_name<T>());
      std::vector<float> x = rounded<T>(randn(n + off, 1, 3.0f)), dy = rounded<T>(randn(n + off, 2));
      auto dx_dev = upload<T>(x), ddy = upload<T>(dy);
      auto out = poisoned<T>(n + off), din = poisoned<T>(n + off);
      cuda::gelu_forward(out.data() + off, dx_dev.data() + off, n, ctx());
      cuda::gelu_backward(din.data() + off, dx_dev.data() + off, ddy.data() + off, n, ctx());
      std::vector<float> ref(n), dref(n);
      cpu::gelu_forward(ref.data(), x.data() + off, n);
      cpu::gelu_backward(dref.data(), x.data() + off, dy.data() + off, n);
      const auto got = download(out), dgot = download(din);
      EXPECT_LT(rel_err({got.begin() + off, got.end()}, ref), tolerance<T>());
      EXPECT_LT(rel_err({dgot.begin() + off, dgot.end()}, dref), tolerance<T>());
    }
}

TYPED_TEST(CudaElementwise, GeluBackwardInPlace) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const size_t n = 260;
  std::vector<float> x = rounded<T>(randn(n, 3, 2.0f)), dy = rounded<T>(randn(n, 4));
  auto dx = upload<T>(x), d = upload<T>(dy), sep = poisoned<T>(n);
  cuda::gelu_backward(sep.data(), dx.data(), d.data(), n, ctx());
  cuda::gelu_backward(d.data(), dx.data(), d.data(), n, ctx());  // dinp aliases dout
  EXPECT_EQ(rel_err(download(d), download(sep)), 0.0);
}

TYPED_TEST(CudaElementwise, AccumulateMatchesCpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  for (size_t n : kSizes)
    for (size_t off : {0, 1}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " offset=" + std::to_string(off) + " " + type_name<T>());
      std::vector<float> a = rounded<T>(randn(n + off, 5)), b = rounded<T>(randn(n + off, 6));
      auto da = upload<T>(a), db = upload<T>(b);
      // accumulate: a += b (the + = contract)
      cuda::accumulate(da.data() + off, db.data() + off, n, ctx());
      cpu::accumulate(a.data() + off, b.data() + off, n);
      const auto acc = download(da);
      EXPECT_LT(rel_err({acc.begin() + off, acc.end()}, {a.begin() + off, a.end()}), tolerance<T>());
    }
}

}  // namespace
}  // namespace mptrain
