// cuBLASLt GEMM and the linear layer on the GPU against the CPU (oneDNN) products: every
// transpose combination, accumulate on/off, fp32 (no tensor cores), TF32, bf16 and fp16
// operands (with 16-bit or fp32 C), the bias / GELU / bias-gradient / GELU-gradient epilogues
// against the CPU and against their unfused twins; plans are cached.
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cpu/context.h"
#include "backend/cuda/activations.h"
#include "backend/cuda/gemm.h"
#include "backend/ops/gemm.h"
#include "common/cpu_fp32.h"
#include "cuda/gpu_test_util.h"
#include "cuda/linear_twin.h"

namespace mptrain {
namespace {

using namespace gputest;

struct Dims {
  int M, N, K;
};
const Dims kGemmDims[] = {{31, 33, 32},    {32, 31, 33},    {33, 32, 31},
                          {127, 129, 128}, {129, 128, 127}, {260, 64, 96}};

template <class T>
class CudaGemm : public ::testing::Test {};
TYPED_TEST_SUITE(CudaGemm, StorageTypes);

// C (type TC) = op(A)·op(B) (+C) with A, B of type T, against cpu::gemm on the rounded inputs.
template <class T, class TC>
void check_gemm(ComputeType math, double tol) {
  for (const Dims& d : kGemmDims)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int acc = 0; acc < 2; ++acc) {
          SCOPED_TRACE("M=" + std::to_string(d.M) + " N=" + std::to_string(d.N) +
                       " K=" + std::to_string(d.K) + " ta=" + std::to_string(ta) +
                       " tb=" + std::to_string(tb) + " acc=" + std::to_string(acc) + " AB=" + type_name<T>() +
                       " C=" + type_name<TC>() + " math=" + compute_name(math));
          const size_t MK = static_cast<size_t>(d.M) * d.K, KN = static_cast<size_t>(d.K) * d.N,
                       MN = static_cast<size_t>(d.M) * d.N;
          std::vector<float> a = rounded<T>(randn(MK, 1)), b = rounded<T>(randn(KN, 2)),
                             c0 = rounded<TC>(randn(MN, 3));
          auto ga = upload<T>(a), gb = upload<T>(b);
          auto gc = acc ? upload<TC>(c0) : poisoned<TC>(MN);
          cuda::gemm(gc.data(), cuda::storage_of<TC>(), ga.data(), gb.data(), cuda::storage_of<T>(), d.M, d.N,
                     d.K, ta, tb, acc, math, {}, ctx());
          std::vector<float> ref = c0;
          cpu::gemm(ref.data(), a.data(), b.data(), d.M, d.N, d.K, ta, tb, acc, cpu_ctx());
          EXPECT_LT(rel_err(download(gc), ref), tol);
        }
}

TYPED_TEST(CudaGemm, MatchesCpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  if constexpr (std::is_same_v<T, float>) {
    check_gemm<float, float>(ComputeType::F32, 1e-5);
    check_gemm<float, float>(ComputeType::TF32, 1e-3);
  } else {
    check_gemm<T, T>(ComputeType::F32, 1e-2);
    check_gemm<T, float>(ComputeType::F32, 1e-2);  // 16-bit operands, fp32 result (master grads)
  }
}

struct Linear {
  int N, C, OC;
};
// C and OC multiples of 8 where the GELU epilogues need them; odd N everywhere.
const Linear kLinear[] = {{33, 32, 64}, {127, 64, 128}, {129, 128, 96}, {260, 96, 32}, {31, 40, 48}};

template <class T>
double linear_tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-2;
}

TYPED_TEST(CudaGemm, LinearForwardBackwardMatchCpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const auto math = ComputeType::F32;
  for (const Linear& k : kLinear) {
    SCOPED_TRACE("N=" + std::to_string(k.N) + " C=" + std::to_string(k.C) + " OC=" + std::to_string(k.OC) +
                 " " + type_name<T>());
    const size_t NC = static_cast<size_t>(k.N) * k.C, CO = static_cast<size_t>(k.C) * k.OC,
                 NO = static_cast<size_t>(k.N) * k.OC;
    std::vector<float> inp = rounded<T>(randn(NC, 1)), w = rounded<T>(randn(CO, 2, 0.2f)),
                       bias = rounded<T>(randn(k.OC, 3)), dout = rounded<T>(randn(NO, 4)),
                       dinp0 = rounded<T>(randn(NC, 5)), dw0 = rounded<T>(randn(CO, 6)),
                       db0 = rounded<T>(randn(k.OC, 7));
    auto gi = upload<T>(inp), gw = upload<T>(w), gb = upload<T>(bias), gdo = upload<T>(dout);
    // forward with bias epilogue
    auto out = poisoned<T>(NO);
    cuda::matmul_forward(out.data(), gi.data(), gw.data(), gb.data(), k.N, k.C, k.OC, math, ctx());
    std::vector<float> ref(NO);
    cpu::matmul_forward(ref.data(), inp.data(), w.data(), bias.data(), k.N, k.C, k.OC, cpu_ctx());
    EXPECT_LT(rel_err(download(out), ref), linear_tol<T>());
    // forward without bias
    cuda::matmul_forward<T>(out.data(), gi.data(), gw.data(), nullptr, k.N, k.C, k.OC, math, ctx());
    std::vector<float> ref_nb(NO);
    cpu::matmul_forward(ref_nb.data(), inp.data(), w.data(), nullptr, k.N, k.C, k.OC, cpu_ctx());
    EXPECT_LT(rel_err(download(out), ref_nb), linear_tol<T>());
    // backward (+=), bias gradient from the epilogue
    auto gdi = upload<T>(dinp0), gdw = upload<T>(dw0), gdb = upload<T>(db0);
    cuda::matmul_backward(gdi.data(), gdw.data(), gdb.data(), gdo.data(), gi.data(), gw.data(), k.N, k.C,
                          k.OC, math, ctx());
    std::vector<float> rdi = dinp0, rdw = dw0, rdb = db0;
    cpu::matmul_backward(rdi.data(), rdw.data(), rdb.data(), dout.data(), inp.data(), w.data(), k.N, k.C,
                         k.OC, cpu_ctx());
    EXPECT_LT(rel_err(download(gdi), rdi), linear_tol<T>());
    EXPECT_LT(rel_err(download(gdw), rdw), linear_tol<T>());
    EXPECT_LT(rel_err(download(gdb), rdb), linear_tol<T>());
  }
}

TYPED_TEST(CudaGemm, GeluEpiloguesMatchUnfusedTwinAndCpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const auto math = ComputeType::F32;
  for (const Linear& k : kLinear) {
    SCOPED_TRACE("N=" + std::to_string(k.N) + " C=" + std::to_string(k.C) + " OC=" + std::to_string(k.OC) +
                 " " + type_name<T>());
    const size_t NC = static_cast<size_t>(k.N) * k.C, CO = static_cast<size_t>(k.C) * k.OC,
                 NO = static_cast<size_t>(k.N) * k.OC;
    std::vector<float> inp = rounded<T>(randn(NC, 1)), w = rounded<T>(randn(CO, 2, 0.3f)),
                       bias = rounded<T>(randn(k.OC, 3));
    auto gi = upload<T>(inp), gw = upload<T>(w), gb = upload<T>(bias);
    // fused forward: pre (aux) and gelu(pre)
    auto pre = poisoned<T>(NO), out = poisoned<T>(NO);
    cuda::matmul_forward(out.data(), gi.data(), gw.data(), gb.data(), k.N, k.C, k.OC, math, ctx(),
                         pre.data());
    // unfused twin
    auto pre2 = poisoned<T>(NO), out2 = poisoned<T>(NO);
    cuda::matmul_forward(pre2.data(), gi.data(), gw.data(), gb.data(), k.N, k.C, k.OC, math, ctx());
    cuda::gelu_forward(out2.data(), pre2.data(), NO, ctx());
    // CPU
    std::vector<float> rpre(NO), rout(NO);
    cpu::matmul_forward(rpre.data(), inp.data(), w.data(), bias.data(), k.N, k.C, k.OC, cpu_ctx());
    const std::vector<float> rpre_t = rounded<T>(rpre);
    cpu::gelu_forward(rout.data(), rpre_t.data(), NO);
    EXPECT_LT(rel_err(download(pre), rpre), linear_tol<T>());
    EXPECT_LT(rel_err(download(out), rout), linear_tol<T>());
    EXPECT_LT(rel_err(download(out), download(out2)), linear_tol<T>());
    // fused forward without a bias (cuBLASLt's GELU_AUX, a plan of its own)
    auto pre_nb = poisoned<T>(NO), out_nb = poisoned<T>(NO);
    cuda::matmul_forward<T>(out_nb.data(), gi.data(), gw.data(), nullptr, k.N, k.C, k.OC, math, ctx(),
                            pre_nb.data());
    std::vector<float> rpre_nb(NO), rout_nb(NO);
    cpu::matmul_forward(rpre_nb.data(), inp.data(), w.data(), nullptr, k.N, k.C, k.OC, cpu_ctx());
    const std::vector<float> rpre_nb_t = rounded<T>(rpre_nb);
    cpu::gelu_forward(rout_nb.data(), rpre_nb_t.data(), NO);
    EXPECT_LT(rel_err(download(pre_nb), rpre_nb), linear_tol<T>());
    EXPECT_LT(rel_err(download(out_nb), rout_nb), linear_tol<T>());

    // fused backward through GELU: this layer's input is gelu(pre_in), pre_in[N,C]; dinp (=) is
    // the gradient w.r.t. pre_in. Reuse inp as pre_in (any values do).
    const std::vector<float>& pre_in = inp;
    std::vector<float> gelu_in(NC);
    cpu::gelu_forward(gelu_in.data(), pre_in.data(), NC);
    gelu_in = rounded<T>(gelu_in);
    std::vector<float> dout = rounded<T>(randn(NO, 8));
    auto ggin = upload<T>(gelu_in), gpre_in = upload<T>(pre_in), gdo = upload<T>(dout);
    auto dpre = poisoned<T>(NC), dw = upload<T>(std::vector<float>(CO, 0.0f));
    cuda::matmul_backward<T>(dpre.data(), dw.data(), nullptr, gdo.data(), ggin.data(), gw.data(), k.N, k.C,
                             k.OC, math, ctx(), gpre_in.data());
    // unfused twin: product into zeros, then gelu_backward
    auto dg = upload<T>(std::vector<float>(NC, 0.0f)), dw2 = upload<T>(std::vector<float>(CO, 0.0f));
    cuda::matmul_backward<T>(dg.data(), dw2.data(), nullptr, gdo.data(), ggin.data(), gw.data(), k.N, k.C,
                             k.OC, math, ctx());
    auto dpre2 = poisoned<T>(NC);
    cuda::gelu_backward(dpre2.data(), gpre_in.data(), dg.data(), NC, ctx());
    // CPU
    std::vector<float> rdg(NC, 0.0f), rdw(CO, 0.0f), rdpre(NC);
    cpu::matmul_backward(rdg.data(), rdw.data(), nullptr, dout.data(), gelu_in.data(), w.data(), k.N, k.C,
                         k.OC, cpu_ctx());
    const std::vector<float> rdg_t = rounded<T>(rdg);
    cpu::gelu_backward(rdpre.data(), pre_in.data(), rdg_t.data(), NC);
    EXPECT_LT(rel_err(download(dpre), rdpre), linear_tol<T>());
    EXPECT_LT(rel_err(download(dpre), download(dpre2)), linear_tol<T>());
    EXPECT_LT(rel_err(download(dw), rdw), linear_tol<T>());
  }
}

// A bias one element past an aligned address (a bias inside a parameter table whose C is not a
// multiple of the pack width): the bias and fused-GELU epilogues give the aligned bias's result
// (the plan's heuristic must see the real bias pointer to pick an algorithm that allows it).
TYPED_TEST(CudaGemm, UnalignedBiasEqualsAlignedBias) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const int N = 33, C = 32, OC = 64;
  const std::vector<float> inp = rounded<T>(randn(static_cast<size_t>(N) * C, 61)),
                           w = rounded<T>(randn(static_cast<size_t>(C) * OC, 62, 0.3f)),
                           bias = rounded<T>(randn(OC, 63));
  std::vector<float> shifted(OC + 1, 0.0f);
  std::copy(bias.begin(), bias.end(), shifted.begin() + 1);
  auto gi = upload<T>(inp), gw = upload<T>(w), gb = upload<T>(bias), gs = upload<T>(shifted);
  const size_t NO = static_cast<size_t>(N) * OC;
  for (int gelu = 0; gelu < 2; ++gelu) {
    SCOPED_TRACE(type_name<T>() + (gelu ? " gelu_bias" : " bias"));
    auto out = poisoned<T>(NO), out_s = poisoned<T>(NO), pre = poisoned<T>(NO), pre_s = poisoned<T>(NO);
    cuda::matmul_forward<T>(out.data(), gi.data(), gw.data(), gb.data(), N, C, OC, ComputeType::F32, ctx(),
                            gelu ? pre.data() : nullptr);
    cuda::matmul_forward<T>(out_s.data(), gi.data(), gw.data(), gs.data() + 1, N, C, OC, ComputeType::F32,
                            ctx(), gelu ? pre_s.data() : nullptr);
    // Another alignment may pick another algorithm: equal up to the summation order.
    EXPECT_LT(rel_err(download(out_s), download(out)), linear_tol<T>());
    if (gelu) {
      EXPECT_LT(rel_err(download(pre_s), download(pre)), linear_tol<T>());
    }
  }
}

TEST(CudaGemmPlans, RepeatedShapesReuseOnePlan) {
  SKIP_WITHOUT_GPU();
  cuda::DeviceBuffer<float> a(64 * 64), b(64 * 64), c(64 * 64);
  a.zero(ctx()), b.zero(ctx());
  const size_t before = cuda::gemm_plan_count(ctx());
  for (int i = 0; i < 3; ++i)
    cuda::gemm(c.data(), StorageType::F32, a.data(), b.data(), StorageType::F32, 48, 40, 24, false, false,
               false, ComputeType::TF32, {}, ctx());
  EXPECT_EQ(cuda::gemm_plan_count(ctx()), before + 1);
}

TEST(CudaGemmArgs, BadArgumentsAreClearErrors) {
  SKIP_WITHOUT_GPU();
  cuda::DeviceBuffer<float> a(64);
  auto expect = [](auto f, const std::string& text) {
    try {
      f();
      ADD_FAILURE() << "expected an error containing " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect(
      [&] {
        cuda::gemm(a.data(), StorageType::BF16, a.data(), a.data(), StorageType::F16, 2, 2, 2, false, false,
                   false, ComputeType::F32, {}, ctx());
      },
      "[gemm] C must have");
  expect(
      [&] {
        cuda::matmul_forward<float>(a.data(), a.data(), a.data(), nullptr, 2, 2, 3, ComputeType::F32,
                                    ctx(), a.data());
      },
      "[matmul_forward] fused GELU needs OC % 8 == 0");
}

}  // namespace
}  // namespace mptrain
