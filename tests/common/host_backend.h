// A CPU backend for tests that run an optimizer or an op over host buffers without a model (a
// model's own is model.backend()).
#pragma once
#include "backend/cpu/context.h"
#include "backend/cpu/cpu_backend.h"

namespace mptrain {

// One CPU context for a test binary (oneDNN's primitive caches and the thread pool, built once).
inline cpu::Context& host_context() {
  static cpu::Context ctx;
  return ctx;
}

inline Backend& host_backend() {
  static cpu::CpuBackend be(host_context());
  return be;
}

}  // namespace mptrain
