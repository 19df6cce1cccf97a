// CUDA graph capture and replay (graph.h).
#include "backend/cuda/graph.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "backend/cuda/check.h"

namespace mptrain::cuda {

ExecGraph::~ExecGraph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

ExecGraph& ExecGraph::operator=(ExecGraph&& o) noexcept {
  std::swap(exec_, o.exec_);
  return *this;
}

void ExecGraph::launch(Context& ctx) const {
  if (exec_) MPT_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), ctx.stream()));
}

GraphCapture::GraphCapture(Context& ctx) : ctx_(ctx) { begin(); }

GraphCapture::~GraphCapture() {
  if (!active_) return;
  cudaGraph_t g = nullptr;
  if (cudaStreamEndCapture(ctx_.stream(), &g) == cudaSuccess && g) cudaGraphDestroy(g);
  (void)cudaGetLastError();  // an invalidated capture's error was already thrown by its call
}

void GraphCapture::begin() {
  MPT_CUDA_CHECK(cudaStreamBeginCapture(ctx_.stream(), cudaStreamCaptureModeThreadLocal));
  active_ = true;
}

ExecGraph GraphCapture::end(bool again) {
  cudaGraph_t g = nullptr;
  active_ = false;
  MPT_CUDA_CHECK(cudaStreamEndCapture(ctx_.stream(), &g));
  ExecGraph e;
  try {
    size_t nodes = 0;
    MPT_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &nodes));
    cudaGraphExec_t exec = nullptr;
    if (nodes > 0) MPT_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    e.exec_ = exec;
  } catch (...) {
    cudaGraphDestroy(g);
    throw;
  }
  cudaGraphDestroy(g);  // the executable graph is independent of it
  if (again) begin();
  return e;
}

}  // namespace mptrain::cuda
