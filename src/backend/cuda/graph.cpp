// The CUDA backend's capture (backend/backend.h, "Graphs"): stream capture of the backend's one
// stream into a CUDA graph, instantiated once and launched by every replay, so a micro-batch's
// few hundred kernel launches cost the host one (llm.c launches each; PyTorch's
// torch.cuda.graphs / "reduce-overhead" capture the same way).
//
// The capture is thread-local: a call from this thread that would sync or allocate with the
// stream in capture (cudaMalloc, a blocking copy) fails the capture with an Error instead of
// silently leaving work out of the graph. The backend's scratch grows on a shape's first,
// eager run, so a captured run allocates nothing.
#include <cuda_runtime.h>

#include "backend/cuda/check.h"
#include "backend/cuda/cuda_backend.h"

namespace mptrain::cuda {

namespace {

class CudaGraph final : public Graph {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
  ~CudaGraph() override {
    cudaStreamSynchronize(stream_);  // a replay still running keeps its executable
    cudaGraphExecDestroy(exec_);
  }
  void replay() override { MPT_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

}  // namespace

void CudaBackend::run_wait() { ctx_->synchronize(); }

void CudaBackend::run_begin_capture() {
  MPT_CUDA_CHECK(cudaStreamBeginCapture(ctx_->stream(), cudaStreamCaptureModeThreadLocal));
}

std::unique_ptr<Graph> CudaBackend::run_end_capture() {
  cudaGraph_t graph = nullptr;
  // Ending the capture also ends one that a refused call broke; its error is the one reported.
  MPT_CUDA_CHECK(cudaStreamEndCapture(ctx_->stream(), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  MPT_CUDA_CHECK(made);
  return std::make_unique<CudaGraph>(exec, ctx_->stream());
}

}  // namespace mptrain::cuda
