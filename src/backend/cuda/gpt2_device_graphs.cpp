// Gpt2Device's step as CUDA graphs (Gpt2DeviceOptions::graphs): the ~15 launches per layer of
// forward and backward replayed with one cudaGraphLaunch per segment instead of one host call
// each. The first call of each (B, T, accumulate) runs eagerly (it plans every cuBLASLt GEMM
// and grows Context::scratch: neither may happen inside a capture); the second captures and
// replays; later calls replay.
//
// What stays outside the graphs, and why:
//  - the batch upload (tokens | targets | dloss) and the loss download (run_step): pageable
//    host copies cannot be captured, and the host must read the loss anyway; the graphs read
//    the batch region, whose address never changes, so a new batch is just a new upload;
//  - the loss kernel, launched eagerly between the forward graph and the backward segments:
//    the sampled loss's seed and counter change every call, and a captured kernel argument
//    cannot (re-capturing or patching the node per call would cost more than the one launch).
// The backward is cut into segments at each gradient-ready range (grads_ready), and the hook
// is called after the launch of the segment that makes its range final: the same contract as
// the eager path (the work is enqueued; the consumer records an event on ctx.stream()). So
// graphs and the data-parallel overlap work together.
//
// Invalidation: the graphs freeze every pointer. The model's buffers never move, but
// Context::scratch (a GEMM bias gradient) is shared with other users of the Context and may be
// reallocated by them: a step whose scratch area changed since capture is captured again.
#include <utility>

#include "backend/cuda/dispatch.h"
#include "backend/cuda/gpt2_device_impl.h"

namespace mptrain::cuda {

template <class T>
StepGraph Gpt2Device::Impl::capture_step(int B, int Tn, bool accumulate) {
  StepGraph g;
  g.scratch = ctx.scratch(0);
  GraphCapture capture(ctx);
  forward<T>(B, Tn);
  g.segments.push_back({capture.end(true), false, {}});
  // Each gradient-ready range ends a segment (grads_ready calls this instead of the hook).
  cut_capture = [&](ParamRange r) { g.segments.push_back({capture.end(true), true, r}); };
  try {
    backward<T>(B, Tn, accumulate);
  } catch (...) {
    cut_capture = nullptr;
    throw;
  }
  cut_capture = nullptr;
  ExecGraph tail = capture.end(false);  // empty for GPT-2: the last range ends the backward
  if (!tail.empty()) g.segments.push_back({std::move(tail), false, {}});
  return g;
}

void Gpt2Device::Impl::enqueue_step(int B, int Tn, bool accumulate, LossKind kind, uint64_t seed,
                                    uint64_t counter) {
  const StepGraphKey key{B, Tn, accumulate};
  const bool eager = !options.graphs || warmed.insert(key).second;
  dispatch_storage(t, [&](auto tag) {
    using T_ = typename decltype(tag)::type;
    if (eager) {
      forward<T_>(B, Tn);
      loss<T_>(B * Tn, kind, seed, counter);
      backward<T_>(B, Tn, accumulate);
      return;
    }
    auto it = step_graphs.find(key);
    if (it == step_graphs.end() || it->second.scratch != ctx.scratch(0))
      it = step_graphs.insert_or_assign(key, capture_step<T_>(B, Tn, accumulate)).first;
    const StepGraph& g = it->second;
    g.segments.front().graph.launch(ctx);  // the forward
    loss<T_>(B * Tn, kind, seed, counter);
    for (size_t i = 1; i < g.segments.size(); ++i) {
      const StepGraph::Segment& s = g.segments[i];
      s.graph.launch(ctx);
      if (s.announces && grad_ready) grad_ready(s.range.begin, s.range.end);
    }
  });
}

}  // namespace mptrain::cuda
