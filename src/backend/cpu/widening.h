// How the CPU backend serves an op on 16-bit tensors its kernels do not take (a GPU plan's
// 16-bit residual stream, logits, gradients and non-GEMM weights; model/policy_backend.h): widen
// → the fp32 kernel → round. Each such tensor is widened into an fp32 copy of the same layout,
// the op runs on the copies, and what the op writes (= or +=) is rounded back once, to nearest
// even. A GPU kernel reads the 16-bit values, computes in fp32 registers and rounds once on
// store: the same values up to the order of fp32 sums, which is what lets CI run a GPU's plan
// on the CPU backend. An emulation for checking, not a fast path: it costs a pass per tensor.
#pragma once
#include <cstddef>
#include <vector>

#include "backend/view.h"
#include "core/buffer.h"

namespace mptrain::cpu {

class Widening {
 public:
  // The copies live in `pool`'s buffers (grown as needed and kept by the caller for the next op).
  explicit Widening(std::vector<FloatBuffer>& pool) : pool_(pool) {}
  Widening(const Widening&) = delete;
  Widening& operator=(const Widening&) = delete;

  // v itself when it is fp32 or empty; else an fp32 copy of its values with v's shape and
  // strides. Views of one address share one copy (dlogits written in place in the logits, a
  // residual add's output over its input), so they must have the same extent.
  View read(const View& v);
  // read(v), and commit() rounds the copy back into v.
  View write(const View& v);
  // Rounds every written copy back into its tensor.
  void commit();

 private:
  struct Copy {
    View original;
    float* wide = nullptr;
    size_t extent = 0;  // elements from original.ptr to its last one, gaps of a strided view included
    bool written = false;
  };
  Copy& copy_of(const View& v);
  std::vector<FloatBuffer>& pool_;
  std::vector<Copy> copies_;
};

}  // namespace mptrain::cpu
