// The CPU backend's context: the oneDNN engine and stream, and a cache of matmul
// primitives keyed by shape so that no primitive is rebuilt inside a training step.
//
// Everything oneDNN is in context.cpp (which also defines gemm() and gemm_batched()); other
// backend files reach matmuls only through backend/ops/gemm.h. A Context is used by one thread
// at a time: each call rebinds the cached primitive's memory objects to the caller's pointers.
// Ops call oneDNN from outside OpenMP parallel regions, so oneDNN uses all OpenMP threads.
#pragma once
#include <memory>

namespace mptrain::cpu {

class Context {
 public:
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  struct Impl;  // oneDNN objects live in the .cpp so that only one file includes dnnl.hpp
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mptrain::cpu
