// GPU casts agree bit for bit with the host conversions, over all 65536 patterns.
// Reports itself as skipped (never passed) where no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "backend/cuda/cast.h"
#include "backend/device.h"

namespace mptrain {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine"

TEST(CudaCast, AllPatternsMatchHost) {
  SKIP_WITHOUT_GPU();
  const size_t n = 65536;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = bf16_to_f32(Bf16{static_cast<uint16_t>(i)}) * 1.0009765625f;
  float* d_in = nullptr;
  uint16_t* d_out = nullptr;
  float* d_back = nullptr;
  ASSERT_EQ(cudaMalloc(&d_in, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, n * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_back, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_in, host.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<uint16_t> out(n);
  std::vector<float> back(n);

  cuda::cast<Bf16, float>(reinterpret_cast<Bf16*>(d_out), d_in, n, nullptr);
  cuda::cast<float, Bf16>(d_back, reinterpret_cast<Bf16*>(d_out), n, nullptr);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), d_back, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], f32_to_bf16(host[i]).bits) << i;
    ASSERT_EQ(f32_bits(back[i]), f32_bits(bf16_to_f32(Bf16{out[i]}))) << i;
  }

  cuda::cast<Fp16, float>(reinterpret_cast<Fp16*>(d_out), d_in, n, nullptr);
  cuda::cast<float, Fp16>(d_back, reinterpret_cast<Fp16*>(d_out), n, nullptr);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), d_back, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], f32_to_f16(host[i]).bits) << i;
    ASSERT_EQ(f32_bits(back[i]), f32_bits(f16_to_f32(Fp16{out[i]}))) << i;
  }
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_back);
}

}  // namespace
}  // namespace mptrain
