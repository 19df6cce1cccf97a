// FP8's per-tensor scaling (issue 57; ../shared/REFERENCE.md "FP8"): a tensor is cast as x·scale,
// scale = format max / amax / 2^margin, so that its largest magnitude lands at the format's top
// (E4M3's 448, E5M2's 57,344) less `margin` binades of headroom; a GEMM of two cast operands
// multiplies its product by 1/(scale_a·scale_b).
//   current scaling (the default): amax is the tensor's own, taken as it is cast;
//   delayed scaling (Transformer Engine's DelayedScaling): amax is the largest of the last
//     `history` steps' amaxes, known before the cast, so the cast needs no pass of its own.
// An amax of 0 keeps the previous scale (a tensor of zeros says nothing about the next one); a
// non-finite amax keeps it too and says so, for the step to be skipped as fp16's scaler skips one
// (the caller counts it).
#pragma once
#include <cstddef>
#include <vector>

#include "core/fp8.h"

namespace mptrain {

// The scale for a tensor whose largest magnitude is amax; `previous` where amax is 0 or not finite.
float fp8_scale_for(float amax, Fp8Format format, int margin, float previous);

// A tensor's scaling state across steps: its amax history (a window of `history` steps; 1 is
// current scaling) and the scale in use. The amax itself is the backend's (Backend::amax).
class Fp8TensorScaling {
 public:
  Fp8TensorScaling(Fp8Format format, int history, int margin);
  float scale() const { return scale_; }
  // Records this step's amax and sets the scale for the next cast: over the window's amaxes.
  // False (the scale kept, the amax not recorded) when amax is not finite.
  bool update(float amax);
  const std::vector<float>& history() const { return history_; }  // oldest first
  // Checkpoint state: the window and the scale, restored exactly.
  void restore(std::vector<float> history, float scale);

 private:
  Fp8Format format_;
  size_t window_;
  int margin_;
  float scale_ = 1.0f;
  std::vector<float> history_;
};

}  // namespace mptrain
