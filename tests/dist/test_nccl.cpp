// The NCCL communicator. Needs a GPU: without one (or in a build without CUDA) the tests
// skip. With one GPU, a world of one still runs every NCCL call (init over the bootstrap,
// even and uneven partitions, the fp32 and 16-bit all-gathers, gather, broadcast, scalars);
// NcclCollectives.TwoRanks runs the same checks under mpirun when the machine has two GPUs.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "backend/device.h"
#include "core/buffer.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/dist_test_util.h"
#include "dist/nccl_communicator.h"

namespace mptrain {
namespace {

bool have_gpu() { return nccl_compiled() && cuda_device_count() > 0; }

// n floats in a GPU's memory (its CUDA backend's), with host copies the host waits for.
class DeviceFloats {
 public:
  DeviceFloats(Backend& gpu, size_t n) : gpu_(gpu) { buf_.resize(n, gpu.memory()); }
  float* data() { return buf_.data(); }
  void upload(const float* host, size_t n) { gpu_.memory().upload(buf_.data(), host, n * sizeof(float)); }
  void download(float* host, size_t n) { gpu_.memory().download(host, buf_.data(), n * sizeof(float)); }

 private:
  Backend& gpu_;
  FloatBuffer buf_;
};

float value(int r, size_t i) { return static_cast<float>(r + 1) * 0.5f + static_cast<float>(i % 97); }

// Every collective against host-computed expectations, on whatever world the bootstrap has.
void check_collectives(Communicator& boot) {
  auto c = make_nccl_communicator(boot, 60.0);
  const auto gpu = make_cuda_backend(boot.local_rank() % cuda_device_count());  // the communicator's GPU
  EXPECT_STREQ(c->backend(), "nccl");
  const int W = c->world_size(), R = c->rank();
  for (size_t n : {size_t{37}, size_t{16} * W, size_t{100003}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = value(R, i);
    DeviceFloats d(*gpu, n);
    d.upload(h.data(), n);
    c->all_reduce(d.data(), n, ReduceOp::Sum);
    d.download(h.data(), n);
    for (size_t i = 0; i < n; ++i) {
      double sum = 0.0;
      for (int r = 0; r < W; ++r) sum += value(r, i);
      ASSERT_EQ(h[i], static_cast<float>(sum)) << i;
    }
    const Partition p(n, W);
    for (size_t i = 0; i < n; ++i) h[i] = value(R, i);
    d.upload(h.data(), n);
    c->reduce_scatter(d.data(), p, ReduceOp::Avg);
    d.download(h.data(), n);
    for (size_t i = p.begin(R); i < p.end(R); ++i) {
      double sum = 0.0;
      for (int r = 0; r < W; ++r) sum += value(r, i);
      ASSERT_NEAR(h[i], sum / W, 1e-6 * (sum / W)) << i;
    }
    std::vector<float> w(n, -1.0f);
    for (size_t i = p.begin(R); i < p.end(R); ++i) w[i] = static_cast<float>(R * 1000 + i % 13);
    d.upload(w.data(), n);
    c->all_gather(d.data(), p);
    d.download(w.data(), n);
    for (int r = 0; r < W; ++r)
      for (size_t i = p.begin(r); i < p.end(r); ++i) ASSERT_EQ(w[i], static_cast<float>(r * 1000 + i % 13)) << i;
    // The 16-bit all-gather (the GPU ZeRO-1's parameter copy) over the same partition, in a
    // float buffer of half as many elements: bit patterns arrive unchanged, the fill shows gaps.
    std::vector<std::uint16_t> h16(n + 1, 0x7fc1);
    const auto bits = [](int r, size_t i) {
      return static_cast<std::uint16_t>(0x8000u | (static_cast<unsigned>(r) << 11) | (i % 2039));
    };
    for (size_t i = p.begin(R); i < p.end(R); ++i) h16[i] = bits(R, i);
    const size_t words = (n + 1) / 2;
    std::vector<float> staged(words);
    std::memcpy(staged.data(), h16.data(), words * sizeof(float));
    DeviceFloats d16(*gpu, words);
    d16.upload(staged.data(), words);
    c->all_gather(reinterpret_cast<std::uint16_t*>(d16.data()), p);
    d16.download(staged.data(), words);
    std::memcpy(h16.data(), staged.data(), words * sizeof(float));
    for (int r = 0; r < W; ++r)
      for (size_t i = p.begin(r); i < p.end(r); ++i) ASSERT_EQ(h16[i], bits(r, i)) << "16-bit, i=" << i;
    // gather onto the last rank from separate shard buffers
    const int root = W - 1;
    std::vector<float> shard(p.count(R));
    for (size_t k = 0; k < shard.size(); ++k) shard[k] = static_cast<float>(R) + 0.25f * static_cast<float>(k);
    DeviceFloats ds(*gpu, shard.size() + 1);
    ds.upload(shard.data(), shard.size());
    DeviceFloats whole(*gpu, n);
    c->gather(whole.data(), ds.data(), p, root);
    if (R == root) {
      whole.download(w.data(), n);
      for (int r = 0; r < W; ++r)
        for (size_t i = p.begin(r); i < p.end(r); ++i)
          ASSERT_EQ(w[i], static_cast<float>(r) + 0.25f * static_cast<float>(i - p.begin(r)));
    }
  }
  // reduce onto the last rank; reduce_range over ranges that do not follow the shards, handed
  // backwards as a backward pass does, then one wait: to every rank, or each shard to its rank.
  for (size_t n : {size_t{37}, size_t{100003}}) {
    SCOPED_TRACE("reduce, n=" + std::to_string(n));
    const auto mean = [W](size_t i) {
      double sum = 0.0;
      for (int r = 0; r < W; ++r) sum += value(r, i);
      return sum / W;
    };
    std::vector<float> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = value(R, i);
    DeviceFloats d(*gpu, n);
    d.upload(h.data(), n);
    c->reduce(d.data(), n, ReduceOp::Avg, W - 1);
    d.download(h.data(), n);
    if (R == W - 1) {
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(h[i], mean(i), 1e-6 * mean(i)) << i;
    }
    const Partition p(n, W);
    for (const Partition* part : {static_cast<const Partition*>(nullptr), &p}) {
      for (size_t i = 0; i < n; ++i) h[i] = value(R, i);
      d.upload(h.data(), n);
      for (int k = 2; k >= 0; --k) c->reduce_range(d.data(), n * k / 3, n * (k + 1) / 3, part, ReduceOp::Avg);
      c->wait_reductions();
      d.download(h.data(), n);
      const size_t lo = part ? p.begin(R) : 0, hi = part ? p.end(R) : n;
      for (size_t i = lo; i < hi; ++i)
        ASSERT_NEAR(h[i], mean(i), 1e-6 * mean(i)) << (part ? "ZeRO-1 " : "") << i;
    }
  }
  // broadcast of bytes (staged through a float buffer) from the last rank
  std::vector<float> b(8, static_cast<float>(R));
  DeviceFloats db(*gpu, b.size());
  db.upload(b.data(), b.size());
  c->broadcast(db.data(), b.size() * sizeof(float), W - 1);
  db.download(b.data(), b.size());
  for (float x : b) EXPECT_EQ(x, static_cast<float>(W - 1));
  EXPECT_DOUBLE_EQ(c->sum(R + 1.0), W * (W + 1) / 2.0);
  EXPECT_TRUE(c->any(R == 0));
  EXPECT_FALSE(c->any(false));
  c->barrier();
}

TEST(Nccl, WithoutCudaItSaysSo) {
  if (nccl_compiled()) GTEST_SKIP() << "this build has CUDA";
  auto boot = make_single_communicator();
  EXPECT_THROW(make_nccl_communicator(*boot, 10.0), Error);
  EXPECT_THROW(make_cuda_backend(0), Error);
}

TEST(Nccl, WorldOfOneRunsEveryCollective) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  if (topology_from_environment().world_size > 1) GTEST_SKIP() << "under a launcher: see NcclWorker";
  auto boot = make_single_communicator();
  check_collectives(*boot);
}

TEST(NcclWorker, Collectives) {
  if (!have_gpu() || topology_from_environment().world_size < 2) GTEST_SKIP() << "runs under mpirun with GPUs";
  static auto boot = make_host_communicator(60.0);
  check_collectives(*boot);
}

TEST(NcclCollectives, TwoRanks) {
  if (!have_gpu() || cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  auto r = testing::run_command(testing::mpirun(2) + " " + testing::self_executable() +
                                " --gtest_color=no --gtest_filter='NcclWorker.*'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("FAILED"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace mptrain
