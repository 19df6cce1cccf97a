// The optimizer interface the trainer and the benchmark call, whatever the algorithm
// (AdamW in adamw.h, Sophia-G in sophia.h, Muon in muon.h). An optimizer works on flat fp32 buffers
// laid out by the parameter table and owns its per-parameter state: one allocation per
// state role (e.g. AdamW's m and v), each carved by the same table, enumerated by name
// so that checkpoints save and restore any optimizer without knowing which it is.
//
// Second-order methods (Sophia) also need, every few steps, the gradient of a loss on
// labels sampled from the model itself. The optimizer cannot run the model (it knows
// only flat buffers), so it says when an estimate is due and which RNG (seed, counter)
// to sample with, and the training step (train/step.cpp) computes the gradient and hands
// it back through update_curvature(). First-order optimizers never ask.
//
// The arithmetic is the backend's (backend/backend.h's optimizer ops, one launch over the whole
// table with the tensors' decay flags as a bit mask, as llm.c's fused AdamW): an optimizer is its
// per-tensor rules (which tensors decay, which coordinates are real) and its state, on whatever
// backend the model runs on. The state is the backend's
// memory; on the CPU backend that is host memory, which checkpoints read directly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/buffer.h"
#include "core/param_table.h"

namespace mptrain {

enum class OptimizerKind { AdamW, Sophia, Muon };

// "adamw" / "sophia" / "muon": the names used by --optimizer and written into checkpoints.
const char* optimizer_name(OptimizerKind kind);
// Parses a name; throws Error naming the known optimizers.
OptimizerKind parse_optimizer_kind(const std::string& name);

// Which parameters a state role keeps values for: every one, or (Muon: momentum for the hidden
// matrices, AdamW's moments for the rest) only the tensors with / without a MatrixLayout.
enum class StateHolds { All, Matrices, NonMatrices };
bool holds(StateHolds h, const ParamSpec& spec);

// One per-parameter state role: checkpoints store the tensor of parameter <name> as
// "<prefix>.<name>", in the parameter's memory shape, for the parameters the role holds.
struct OptimizerState {
  std::string prefix;
  FloatBuffer buffer;  // table.total() floats, laid out like the parameters (zero where not held)
  StateHolds holds = StateHolds::All;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual OptimizerKind kind() const = 0;
  const char* name() const { return optimizer_name(kind()); }
  // The backend the update runs on; the training step runs the rest of its arithmetic there too
  // (unscale, norm, clip: train/step.cpp).
  Backend& backend() const { return be_; }

  // One update of every parameter with learning rate lr; t is the 1-based optimizer step.
  // grads·grad_scale are the gradients of the step's mean loss: grad_scale carries gradient
  // clipping's factor (clip_coefficient), applied as the update reads each gradient, so that
  // clipping costs no pass over the gradients of its own (the same bits as scaling them first).
  virtual void step(float* params, const float* grads, float lr, int64_t t, float grad_scale) = 0;
  void step(float* params, const float* grads, float lr, int64_t t) { step(params, grads, lr, t, 1.0f); }
  // The same update, which may also run `copies` (to_operand ops whose src lies in params: the
  // model's GEMM weight copies, model/weight_copies.h) over the new weights in its own pass.
  // Returns true when it did (the copies are fresh), false when the caller must still run them
  // (this optimizer or its backend fuses none): the default.
  virtual bool step(float* params, const float* grads, float lr, int64_t t, float grad_scale,
                    std::span<const ToOperandArgs> copies) {
    step(params, grads, lr, t, grad_scale);
    return copies.empty();
  }

  // Per-parameter state, in a fixed order (checkpoint I/O iterates over it).
  std::vector<OptimizerState>& state() { return state_; }
  const std::vector<OptimizerState>& state() const { return state_; }
  // Scalar state that must survive a resume (e.g. Sophia's Hessian RNG counter), as strings
  // for checkpoint metadata. Keys absent from a checkpoint keep their current value.
  virtual std::map<std::string, std::string> scalar_state() const { return {}; }
  virtual void set_scalar_state(const std::map<std::string, std::string>& values) { (void)values; }

  // --- curvature estimates (Sophia); first-order optimizers keep these defaults ---
  // True when, after the update of step t, the step should estimate the curvature.
  virtual bool curvature_due(int64_t t) const {
    (void)t;
    return false;
  }
  // The RNG for the labels of the next estimate: the value for row n depends only on
  // (seed, counter, n), so estimates are reproducible and resume exactly.
  virtual uint64_t curvature_seed() const { return 0; }
  virtual uint64_t curvature_counter() const { return 0; }
  // grads: the clipped gradient of the mean loss on labels sampled with curvature_counter().
  // Updates the curvature state, advances the counter and returns the "win rate": the
  // fraction of (real) coordinates whose next update is not clipped.
  virtual double update_curvature(const float* grads) {
    (void)grads;
    return 0.0;
  }

 protected:
  // Allocates one zeroed state buffer per prefix, each table.total() floats. be: the backend
  // whose ops update the parameters (the model's; must outlive this object).
  Optimizer(const ParamTable& table, const std::vector<std::string>& state_prefixes, Backend& be);

  // The 1-D view of `spec`'s first n elements in a flat buffer laid out by the table.
  static View flat(const float* base, const ParamSpec& spec, size_t n) {
    return View::f32(base + spec.offset, {static_cast<std::int64_t>(n)});
  }
  // The 1-D view of a whole flat buffer laid out by the table.
  View whole(const float* base) const { return View::f32(base, {static_cast<std::int64_t>(table_.total())}); }
  // Bit i set where element i of the table decays (its tensor's `decay` flag), in the backend's
  // memory: the update of every tensor in one launch.
  View decay_mask() const {
    return View::of(decay_mask_.data(), StorageType::I32, {static_cast<std::int64_t>(decay_mask_.size())});
  }

  const ParamTable& table_;
  Backend& be_;
  std::vector<OptimizerState> state_;

 private:
  Buffer<std::uint32_t> decay_mask_;
};

}  // namespace mptrain
