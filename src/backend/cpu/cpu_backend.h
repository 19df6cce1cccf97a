// The CPU backend of the op interface (backend/backend.h): thin routing onto the cpu:: ops
// (oneDNN GEMMs, OpenMP kernels). Every product goes through gemm_mixed, which reads an operand
// in place when it is already in the arithmetic's format (an fp32 policy's, always) and converts
// it once otherwise.
#pragma once
#include <memory>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/widening.h"
#include "backend/ops/attention.h"
#include "backend/ops/gemm_mixed.h"
#include "core/buffer.h"

namespace mptrain::cpu {

class Context;

class CpuBackend : public Backend {
 public:
  // Shares the caller's Context (thread pool and oneDNN primitive caches): tests and benches that
  // build several backends over one.
  explicit CpuBackend(Context& ctx);
  // With a Context of its own (what make_backend builds: no caller outside backend/ names one).
  CpuBackend();
  ~CpuBackend() override;

  const char* name() const override { return "cpu"; }
  BackendCaps caps() const override { return ws_.caps(); }
  // The residual add fuses into the projection's epilogue here (one pass over the fp32
  // The probabilities P [B, NH, T, T] in types.probs, and fp32 scores (+ dS) as scratch.
  AttentionBytes attention_bytes(int B, int T, int C, int NH, const AttentionDtypes& types) const override;
  MemoryResource& memory() override { return host_memory(); }

 protected:
  bool can_run(const OpTypes& t) const override;
  void run_zero(const View& v) override;
#define MPTRAIN_CPU_RUN(A) op_result_t<A> run(const A& a) override;
  MPTRAIN_OP_ARGS(MPTRAIN_CPU_RUN)
#undef MPTRAIN_CPU_RUN

 private:
  // Scratch that grows to the largest need and stays: i = 0 the GEMM's fp32 accumulator, 1 a
  // converted-once upstream gradient.
  void* scratch(int i, size_t bytes);
  // The caller's scratch when it holds `bytes`, else scratch(i, bytes).
  void* scratch_or_own(const View& given, int i, size_t bytes);
  // Where a view `pick(name)` chooses is 16-bit: runs `a` again on fp32 copies of those views
  // (reads widened, writes rounded back once: backend/cpu/widening.h) and returns true. Defined
  // below, so that an op's run() in its own kernel file widens as cpu_backend.cpp's do.
  template <class A, class Pick>
  bool widened(const A& a, Pick pick);
  // The attention's dtypes as the cpu:: kernels take them (dS in the scores' operand storage).
  AttentionTypes typed(const AttentionDtypes& t) const;
  std::unique_ptr<Context> own_;  // the default constructor's context (declared first: ctx_ refers to it)
  Context& ctx_;
  GemmWorkspace ws_;
  FloatBuffer scratch_[2];
  std::vector<FloatBuffer> wide_;  // the fp32 copies of 16-bit tensors widened around a kernel
};

// Every view of an op: what the fp32-only kernels widen (the `pick` of widened()).
inline bool every_view(std::string_view) { return true; }

template <class A, class Pick>
bool CpuBackend::widened(const A& a, Pick pick) {
  // Views the interface types itself (fp32 statistics, int32 indices) stay as they are.
  const auto widens = [&](const ArgView& v) { return v.typed && v.access != Access::Scratch && pick(v.name); };
  bool any = false;
  for (const ArgView& v : views_of(a))
    any = any || (widens(v) && !v.view->empty() && v.view->type != StorageType::F32);
  if (!any) return false;
  Widening w(wide_);
  A b = a;
  for (const ArgView& v : b.views()) {
    if (!widens(v)) continue;
    const bool reads = v.access == Access::Read || v.access == Access::ReadRows;
    *v.view = reads ? w.read(*v.view) : w.write(*v.view);
  }
  run(b);
  w.commit();
  return true;
}

}  // namespace mptrain::cpu
