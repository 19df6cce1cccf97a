// SiLU on a GPU (backend/backend.h's SiluArgs): the kernel, its launch over the elementwise map
// (elementwise.cuh) and the backend's run() for it, the op's whole CUDA side in one file
// (docs/dev/adding_an_op.md). One storage type per launch: can_run's default.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/dispatch.h"
#include "backend/cuda/elementwise.cuh"

namespace mptrain::cuda {

namespace {

struct SiluFwd {
  __device__ float operator()(float x) const { return x / (1.0f + expf(-x)); }
};

}  // namespace

void CudaBackend::run(const SiluArgs& a) {
  dispatch_storage(a.x.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    map_op<T, 1>("silu_forward", static_cast<T*>(a.out.ptr), Inputs<T, 1>{{static_cast<const T*>(a.x.ptr)}},
                 static_cast<size_t>(a.x.numel()), SiluFwd{}, *ctx_);
  });
}

}  // namespace mptrain::cuda
