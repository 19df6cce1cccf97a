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
