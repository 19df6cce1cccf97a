// Where a model's backward writes its weight gradients, and when they are final. On the CPU's
// plan: straight into the fp32 master gradients (+=). Under a GPU's plan (policy.weight_grads
// 16-bit, as llm.c): into one micro-batch's 16-bit gradients, zeroed by begin() and widened into
// the fp32 masters range by range — the gradient finaliser.
//
// The backward hands each range of the table as soon as nothing later writes into it (GPT-2: the
// final LayerNorm, each block from the last, then the embeddings, which the tied LM head and the
// embedding backward both write): ready() finalises the range, then calls the gradient-ready
// hook with it, so a data-parallel reduction can start on a block while backward computes the
// next (PyTorch DDP's buckets, llm.c's overlapped all-reduce). finish() hands what is left.
// Every micro-batch hands every range exactly once; under accumulation the masters hold the sum
// so far when the hook sees them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "backend/backend.h"
#include "core/buffer.h"
#include "core/param_table.h"
#include "precision/policy.h"

namespace mptrain {

// Called with a range of the flat fp32 gradients that this micro-batch's backward will not write
// again (finalised into the masters).
using GradsReadyHook = std::function<void(ParamRange range)>;

class WeightGrads {
 public:
  // For n parameters under `policy` (allocates the 16-bit buffer in `memory`, the backend's,
  // when the policy has one).
  void setup(size_t n, const Policy& policy, MemoryResource& memory = host_memory());
  // The gradient of the parameter whose fp32 gradient starts at master_grad (a pointer into
  // master, the fp32 gradients of the same table), as a view of `dims`.
  View at(const float* master_grad, const FloatBuffer& master, std::initializer_list<std::int64_t> dims);
  void set_ready_hook(GradsReadyHook hook) { hook_ = std::move(hook); }
  // Before a backward: the 16-bit gradients start at 0 (nothing on the CPU's plan).
  void begin(Backend& be);
  // The backward has written all of `range`: master[range] (+=) its 16-bit gradients, widened
  // (nothing on the CPU's plan), then the hook. A range handed twice in one backward is an Error.
  void ready(Backend& be, FloatBuffer& master, ParamRange range);
  // After the backward: ready() for each range not handed yet, in ascending order.
  void finish(Backend& be, FloatBuffer& master);
  // A backward captured in a graph (be.capturing()) hands its ranges to no hook: the graph's
  // replay finalises them, then this calls the hook with each, in the order they were handed.
  void replay_hooks();

 private:
  View lowp() { return View::of(lowp_.data(), type_, {static_cast<std::int64_t>(n_)}); }
  StorageType type_ = StorageType::F32;
  size_t n_ = 0;
  FloatBuffer lowp_;  // n_ values of type_, or empty
  GradsReadyHook hook_;
  std::vector<ParamRange> handed_;  // in this backward
};

}  // namespace mptrain
