// CUDA graphs: the work enqueued on a Context's stream captured into executable graphs, and
// their replay with one launch each. A capture can be cut into several graphs (end, then begin
// again) so that the host can act between their launches (e.g. announce that a range of
// gradients is final: Gpt2Device's gradient-ready hook). No CUDA types in this header.
//
// Rules for what is captured (the launchers keep them once every shape has run eagerly once):
// no allocation, no host sync, no host-to-device copy of pageable memory; every pointer and
// kernel argument is frozen into the graph, so a replay reads the same buffers (their contents
// may change between replays: that is how a new batch gets in).
#pragma once
#include "backend/cuda/context.h"

namespace mptrain::cuda {

// An executable graph (RAII over cudaGraphExec_t; move-only). Destroying one that is still
// running is allowed: CUDA frees it when it completes.
class ExecGraph {
 public:
  ExecGraph() = default;
  ~ExecGraph();
  ExecGraph(ExecGraph&& o) noexcept : exec_(o.exec_) { o.exec_ = nullptr; }
  ExecGraph& operator=(ExecGraph&& o) noexcept;
  ExecGraph(const ExecGraph&) = delete;
  ExecGraph& operator=(const ExecGraph&) = delete;

  bool empty() const { return exec_ == nullptr; }
  // cudaGraphLaunch on ctx.stream() (asynchronous); an empty graph launches nothing.
  void launch(Context& ctx) const;

 private:
  friend class GraphCapture;
  void* exec_ = nullptr;
};

// Captures ctx.stream() from construction (cudaStreamCaptureModeThreadLocal: an unsafe call
// such as cudaMalloc or a sync from this thread fails loudly instead of being recorded).
class GraphCapture {
 public:
  explicit GraphCapture(Context& ctx);
  // An unfinished capture (an exception in the middle) is ended and dropped, so the stream
  // is usable again.
  ~GraphCapture();
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

  // Ends the capture and returns what was enqueued since it began, instantiated (empty when
  // nothing was); when `again`, a new capture begins at once.
  ExecGraph end(bool again);

 private:
  void begin();
  Context& ctx_;
  bool active_ = false;
};

}  // namespace mptrain::cuda
