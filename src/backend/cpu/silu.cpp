// SiLU on the CPU (backend/backend.h's SiluArgs): the kernel and the backend's run() for it, the
// op's whole CPU side in one file (docs/dev/adding_an_op.md).
#include <cmath>
#include <cstddef>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/vec_math.h"

namespace mptrain::cpu {

namespace {

// out[i] = x[i]·sigmoid(x[i]) in fp32; out may be x.
void silu_forward(float* out, const float* x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = x[i] / (1.0f + vexp(-x[i]));
}

}  // namespace

void CpuBackend::run(const SiluArgs& a) {
  if (widened(a, every_view)) return;  // 16-bit tensors: widened around the fp32 kernel
  silu_forward(a.out.as<float>(), a.x.as<float>(), static_cast<size_t>(a.x.numel()));
}

}  // namespace mptrain::cpu
