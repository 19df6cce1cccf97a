// Op conformance, the CPU half (tests/common/conformance.h): every op of the interface, in every
// dtype combination the CPU backend's supports() accepts (all of them: its widening serves a GPU
// plan's 16-bit tensors too), on shapes that reach every code path, against the float64
// reference. The same cases run on the CUDA backend on a lent GPU
// (tests/cuda/test_backend_conformance_gpu.cpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/device.h"
#include "backend/cpu/cpu_backend.h"
#include "common/conformance_cases.h"

namespace mptrain {
namespace {

TEST(Conformance, CpuBackendMatchesTheFloat64ReferenceOnEveryCaseItAccepts) {
  cpu::Context ctx;
  cpu::CpuBackend be(ctx);
  conformance::run_all(be);
}

// The tensors each op's cases enumerate dtypes over are read off its Args' views(): an op's own
// choices, without the views that follow another's dtype or belong to another op of the Args.
TEST(Conformance, DtypeListsComeFromTheArgsViews) {
  using Names = std::vector<std::string>;
  auto names = [](Op op) {
    Names n;
    for (const char* s : op_dtype_tensors(op)) n.push_back(s);
    return n;
  };
  EXPECT_EQ(names(Op::Linear), (Names{"out", "x", "w"}));
  EXPECT_EQ(names(Op::LinearActivation), (Names{"out", "x", "w", "pre"}));
  EXPECT_EQ(names(Op::LinearResidual), (Names{"out", "x", "w", "residual"}));
  EXPECT_EQ(names(Op::LinearBackward), (Names{"dx", "dw", "dy", "x", "w"}));
  EXPECT_EQ(names(Op::LinearActivationBackward), (Names{"dx", "dw", "dy", "x", "w", "pre"}));
  EXPECT_EQ(names(Op::RmsNormBackward), (Names{"dx", "dgamma", "dout", "x", "gamma"}));
  EXPECT_EQ(names(Op::Attention), (Names{"qkv", "out", "probs"}));
  EXPECT_EQ(names(Op::AttentionBackward), (Names{"qkv", "out", "probs"}));
  EXPECT_EQ(names(Op::EmbeddingBackward), (Names{"dword", "dout"}));
  EXPECT_EQ(names(Op::CrossEntropy), (Names{"dlogits", "logits"}));
  EXPECT_EQ(names(Op::SwigluBackward), (Names{"dgate_up", "dout", "gate_up"}));
  for (int i = 0; i < kNumOps; ++i)
    EXPECT_FALSE(names(static_cast<Op>(i)).empty()) << backend_op_name(static_cast<Op>(i));
}

// The CUDA half's list, made here from the CUDA backend's own capability check (its sizing-only
// form needs no GPU): every op of the enum has cases there too, so the GPU run cannot silently
// leave an op out. The count per op is printed; the run itself waits for a GPU.
TEST(Conformance, CudaListCoversEveryOp) {
  if (!cuda_compiled()) GTEST_SKIP() << "this build has no CUDA backend";
  const std::unique_ptr<Backend> gpu = make_cuda_sizing_backend();
  const std::vector<conformance::Case> cases = conformance::all_cases(*gpu);
  std::map<std::string, int> per_op;
  for (const conformance::Case& c : cases) ++per_op[c.zero ? "zero" : backend_op_name(c.op)];
  std::string counts;
  for (const auto& [op, n] : per_op) counts += " " + op + "=" + std::to_string(n);
  std::printf("[ conformance ] cuda: %zu cases listed:%s\n", cases.size(), counts.c_str());
  EXPECT_EQ(conformance::uncovered(cases), "") << "ops the CUDA backend accepts no dtype combination of";
}

}  // namespace
}  // namespace mptrain
