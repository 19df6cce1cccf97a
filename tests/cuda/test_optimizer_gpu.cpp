// The optimizer-side kernels on the GPU against their CPU counterparts: fused AdamW over
// several tensors with and without weight decay (one launch) and its low-precision copy,
// grad_scale and skip flags; the deterministic global norm and clip factor; fp16 unscale with
// the device-side finite flag.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/backend.h"
#include "backend/cuda/adamw.h"
#include "backend/cuda/grad_norm.h"
#include "backend/cuda/loss_scale.h"
#include "backend/ops/optimizer.h"
#include "common/cpu_fp32.h"
#include "cuda/gpu_test_util.h"
#include "optim/adamw.h"
#include "precision/loss_scaler.h"

namespace mptrain {
namespace {

using namespace gputest;

TEST(CudaAdamW, MatchesCpuPerTensorUpdates) {
  SKIP_WITHOUT_GPU();
  // Tensors of awkward sizes, alternating decay, so that mask words and float4 groups straddle
  // tensor boundaries.
  const std::vector<size_t> sizes = {33, 128, 31, 260, 1, 129, 1000};
  size_t n = 0;
  std::vector<std::pair<size_t, size_t>> decayed, all;
  for (size_t i = 0; i < sizes.size(); ++i) {
    all.push_back({n, n + sizes[i]});
    if (i % 2 == 0) decayed.push_back({n, n + sizes[i]});
    n += sizes[i];
  }
  std::vector<float> p = randn(n, 1), g = randn(n, 2, 0.1f), m = randn(n, 3, 0.01f), v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.001f * (1.0f + std::abs(randn(1, 100 + i)[0]));
  cuda::DeviceBuffer<float> gp(p, ctx()), gg(g, ctx()), gm(m, ctx()), gv(v, ctx());
  cuda::DeviceBuffer<uint32_t> mask(decay_mask_bits(n, decayed), ctx());
  cuda::AdamWArgs a;
  a.lr = 3e-3f;
  a.weight_decay = 0.1f;
  for (int64_t t = 1; t <= 3; ++t) {
    a.t = t;
    cuda::adamw_update(gp.data(), gg.data(), gm.data(), gv.data(), mask.data(), n, a, ctx());
    for (size_t i = 0; i < all.size(); ++i) {
      const size_t o = all[i].first;
      cpu::adamw_update(p.data() + o, g.data() + o, m.data() + o, v.data() + o, sizes[i], a.lr, a.beta1,
                        a.beta2, a.eps, i % 2 == 0 ? a.weight_decay : 0.0f, t);
    }
  }
  EXPECT_LT(rel_err(gp.download(ctx()), p), 1e-5);
  EXPECT_LT(rel_err(gm.download(ctx()), m), 1e-5);
  EXPECT_LT(rel_err(gv.download(ctx()), v), 1e-5);
}

// A range that starts inside the buffers (Muon's AdamW runs between its matrices start after
// BERT's 2-element NSP bias, 8 bytes past a 16-byte boundary): the same update as the CPU's, at
// every offset from a boundary, the mask's bits counted from the range's start.
TEST(CudaAdamW, RangesStartingInsideABufferMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const size_t total = 300;
  for (size_t offset : {size_t{1}, size_t{2}, size_t{3}, size_t{5}}) {
    for (size_t n : {size_t{1}, size_t{3}, size_t{37}, size_t{260}}) {
      SCOPED_TRACE("offset " + std::to_string(offset) + " n " + std::to_string(n));
      std::vector<float> p = randn(total, 11), g = randn(total, 12, 0.1f), m = randn(total, 13, 0.01f), v(total);
      for (size_t i = 0; i < total; ++i) v[i] = 0.001f * (1.0f + std::abs(randn(1, 200 + i)[0]));
      cuda::DeviceBuffer<float> gp(p, ctx()), gg(g, ctx()), gm(m, ctx()), gv(v, ctx());
      cuda::DeviceBuffer<uint32_t> mask(decay_mask_bits(n, {{0, n / 2}}), ctx());
      cuda::AdamWArgs a;
      a.lr = 3e-3f;
      a.weight_decay = 0.1f;
      cuda::adamw_update(gp.data() + offset, gg.data() + offset, gm.data() + offset, gv.data() + offset,
                         mask.data(), n, a, ctx());
      cpu::adamw_update(p.data() + offset, g.data() + offset, m.data() + offset, v.data() + offset, n / 2, a.lr,
                        a.beta1, a.beta2, a.eps, a.weight_decay, 1);
      cpu::adamw_update(p.data() + offset + n / 2, g.data() + offset + n / 2, m.data() + offset + n / 2,
                        v.data() + offset + n / 2, n - n / 2, a.lr, a.beta1, a.beta2, a.eps, 0.0f, 1);
      EXPECT_LT(rel_err(gp.download(ctx()), p), 1e-6) << "params (outside the range: untouched)";
      EXPECT_LT(rel_err(gm.download(ctx()), m), 1e-6);
      EXPECT_LT(rel_err(gv.download(ctx()), v), 1e-6);
    }
  }
}

TEST(CudaAdamW, GradScaleMultipliesEveryGradient) {
  SKIP_WITHOUT_GPU();
  const size_t n = 77;
  std::vector<float> p = randn(n, 1), g = randn(n, 2), m(n, 0.0f), v(n, 0.0f);
  cuda::DeviceBuffer<float> gp(p, ctx()), gg(g, ctx()), gm(m, ctx()), gv(v, ctx());
  cuda::DeviceBuffer<uint32_t> mask(decay_mask_bits(n, {{0, n}}), ctx());
  cuda::AdamWArgs a;
  a.lr = 1e-2f;
  a.grad_scale = 0.25f;
  cuda::adamw_update(gp.data(), gg.data(), gm.data(), gv.data(), mask.data(), n, a, ctx());
  for (float& x : g) x *= 0.25f;
  cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), n, a.lr, a.beta1, a.beta2, a.eps, a.weight_decay,
                    1);
  EXPECT_LT(rel_err(gp.download(ctx()), p), 1e-5);
}

TEST(CudaSumSquares, MatchesCpuAndIsDeterministic) {
  SKIP_WITHOUT_GPU();
  for (size_t n : {size_t{1}, size_t{31}, size_t{33}, size_t{129}, size_t{260}, size_t{1} << 20,
                   (size_t{1} << 20) + 3}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> g = randn(n, 9, 0.5f);
    cuda::DeviceBuffer<float> gg(g, ctx());
    cuda::DeviceBuffer<double> sum(1), scratch(cuda::sum_squares_scratch_doubles());
    const double ref = global_norm(g.data(), n);
    cuda::sum_squares(sum.data(), gg.data(), n, scratch.data(), ctx());
    const double got = sum.download(ctx())[0];
    EXPECT_NEAR(got, ref * ref, 1e-12 * ref * ref);
    cuda::sum_squares(sum.data(), gg.data(), n, scratch.data(), ctx());
    const double again = sum.download(ctx())[0];
    EXPECT_EQ(0, std::memcmp(&got, &again, sizeof(double))) << "not deterministic";
  }
}

// At GradScaler's power-of-two scale and at one whose reciprocal is inexact (a hand-set
// --loss-scale-init): the multiplier is the caller's, so the bits are the CPU's.
TEST(CudaLossScale, UnscaleAndCheckMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const float init : {65536.0f, 3000.0f}) {
  LossScaler scaler(LossScalerConfig{.init_scale = init});
  for (size_t n : {size_t{1}, size_t{33}, size_t{260}, size_t{4099}}) {
    for (int bad : {-1, 0, 1}) {  // -1: all finite; 0/1: an inf / a NaN at the end (in the scalar tail)
      SCOPED_TRACE("scale " + std::to_string(init) + " n=" + std::to_string(n) + " bad=" + std::to_string(bad));
      std::vector<float> g = randn(n, 4, 1000.0f);
      if (bad >= 0) g[n - 1] = bad == 0 ? INFINITY : NAN;
      cuda::DeviceBuffer<float> gg(g, ctx());
      cuda::DeviceBuffer<int> flag(std::vector<int>{0}, ctx());
      cuda::unscale_and_check(gg.data(), n, scaler.inv_scale(), flag.data(), ctx());
      const bool cpu_found = cpu::unscale_and_check(g.data(), n, scaler.inv_scale());
      EXPECT_EQ(flag.download(ctx())[0] != 0, cpu_found);
      const auto got = gg.download(ctx());
      for (size_t i = 0; i < n; ++i)
        if (std::isfinite(g[i])) {
          ASSERT_EQ(got[i], g[i]) << i;  // one multiply: bit-identical
        }
    }
  }
  }
}

}  // namespace
}  // namespace mptrain
