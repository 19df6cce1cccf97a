// A CPU backend for tests that run an optimizer or an op over host buffers without a model (a
// model's own is model.backend()).
#pragma once
#include "backend/cpu/context.h"
#include "backend/cpu/cpu_backend.h"

#include <memory>

namespace mptrain {

// One CPU context for a test binary (oneDNN's primitive caches and the thread pool, built once).
inline cpu::Context& host_context() {
  static cpu::Context ctx;
  return ctx;
}

// A CPU backend on `ctx`, to build a model on (model/ sees only the backend interface).
inline std::unique_ptr<Backend> cpu_backend(cpu::Context& ctx = host_context()) {
  return std::make_unique<cpu::CpuBackend>(ctx);
}

inline Backend& host_backend() {
  static cpu::CpuBackend be(host_context());
  return be;
}

}  // namespace mptrain
