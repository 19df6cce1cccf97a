// The CUDA context and device buffers: device properties, round trips through device memory,
// poisoning, and clear errors (a missing device, an impossible allocation).
#include <gtest/gtest.h>

#include "cuda/gpu_test_util.h"

namespace mptrain {
namespace {

using namespace gputest;

TEST(CudaContext, DescribesTheDevice) {
  SKIP_WITHOUT_GPU();
  const cuda::DeviceInfo& d = ctx().info();
  EXPECT_FALSE(d.name.empty());
  EXPECT_GE(d.major, 8) << "the backend is built for sm_80 and sm_90";
  EXPECT_GT(d.sm_count, 0);
  EXPECT_GT(d.global_mem, size_t{1} << 30);
  std::printf("[ device ] %s, sm_%d%d, %d SMs, %zu MiB\n", d.name.c_str(), d.major, d.minor, d.sm_count,
              d.global_mem >> 20);
}

TEST(CudaContext, MissingDeviceIsAClearError) {
  SKIP_WITHOUT_GPU();
  try {
    cuda::Context c(cuda_device_count() + 3);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[cuda] no GPU"), std::string::npos) << e.what();
  }
}

TEST(CudaBuffer, RoundTripAndPoison) {
  SKIP_WITHOUT_GPU();
  std::vector<float> v = randn(1001, 1);
  cuda::DeviceBuffer<float> b(v, ctx());
  EXPECT_EQ(b.download(ctx()), v);
  b.poison(ctx());
  for (float x : b.download(ctx())) ASSERT_TRUE(std::isnan(x));
  cuda::DeviceBuffer<Bf16> h(16);
  h.poison(ctx());
  for (Bf16 x : h.download(ctx())) ASSERT_TRUE(std::isnan(bf16_to_f32(x)));
  cuda::DeviceBuffer<float> moved = std::move(b);
  EXPECT_EQ(moved.size(), v.size());
}

TEST(CudaBuffer, ImpossibleAllocationIsALibraryError) {
  SKIP_WITHOUT_GPU();
  try {
    cuda::DeviceMemory m(size_t{1} << 50);
    FAIL() << "expected an error";
  } catch (const LibraryError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMalloc"), std::string::npos) << e.what();
  }
  // the failure is not sticky: the device still works
  cuda::DeviceBuffer<float> ok(std::vector<float>{1.0f, 2.0f}, ctx());
  EXPECT_EQ(ok.download(ctx())[1], 2.0f);
}

}  // namespace
}  // namespace mptrain
