// Op conformance, the CUDA half (tests/common/conformance.h): the same generated cases as the CPU
// half in CI (tests/backend/test_conformance.cpp) — every op of the interface, in every dtype
// combination the CUDA backend's supports() accepts, on shapes that reach every code path (flash
// attention's head sizes 64 and 128 among them) — against the float64 reference. A case the
// capability check accepts and the backend then refuses is a failure. Skipped without a GPU.
#include <gtest/gtest.h>

#include <memory>

#include "backend/device.h"
#include "common/conformance_cases.h"
#include "cuda/gpu_test_util.h"

namespace mptrain {
namespace {

TEST(Conformance, CudaBackendMatchesTheFloat64ReferenceOnEveryCaseItAccepts) {
  SKIP_WITHOUT_GPU();
  const std::unique_ptr<Backend> be = make_cuda_backend(0);
  conformance::run_all(*be);
}

}  // namespace
}  // namespace mptrain
