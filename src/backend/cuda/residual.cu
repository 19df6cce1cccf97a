// Gradient accumulation: the elementwise sum through elementwise.cuh's map kernel.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/residual.h"

namespace mptrain::cuda {

namespace {
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
}  // namespace

template <class T>
void accumulate(T* dst, const T* src, size_t N, Context& ctx) {
  map_op<T, 2>("accumulate", dst, Inputs<T, 2>{{dst, src}}, N, Add{}, ctx);
}

#define MPT_INSTANTIATE(T) template void accumulate<T>(T*, const T*, size_t, Context&);
MPT_FOR_STORAGE_TYPES(MPT_INSTANTIATE)

}  // namespace mptrain::cuda
