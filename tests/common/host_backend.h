// A CPU backend for tests that run an optimizer or an op over host buffers without a model (a
// model's own is model.backend()).
#pragma once
#include "backend/cpu/context.h"
#include "backend/cpu/cpu_backend.h"

namespace mptrain {

inline Backend& host_backend() {
  static cpu::Context ctx;
  static cpu::CpuBackend be(ctx);
  return be;
}

}  // namespace mptrain
