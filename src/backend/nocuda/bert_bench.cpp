// `mptrain bench --device cuda --model bert` in a build without the CUDA backend: one clear error.
#include "core/error.h"
#include "train/cuda_bench.h"

namespace mptrain {

BenchResult run_cuda_bert_bench(const BenchOptions&) {
  throw Error("[bench] this build has no CUDA backend (configure with -DMPTRAIN_CUDA=ON)");
}

}  // namespace mptrain
